// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16

// Producer family (iota): an op with no float operand that makes a float runs
// as is; its result is data at scale 1, converted to the data dtype.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[I:%.*]] = stablehlo.iota dim = 0 : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[I]], [[ONE]] : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main
// F16-SAME:    () -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[I:%.*]] = stablehlo.iota dim = 0 : tensor<4xf32>
// F16-NEXT:    [[IH:%.*]] = stablehlo.convert [[I]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// F16-NEXT:    return [[IH]], [[ONE]] : tensor<4xf16>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An iota whose largest value (its length - 1) passes f16's 65504 takes the static
// scale that brings it below 2^15: 69999 / 4. In f32 it stays at scale 1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<70000xf32>, tensor<f32>)
// CHECK-NEXT:    [[I:%.*]] = stablehlo.iota dim = 0 : tensor<70000xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[I]], [[ONE]]

// F16-LABEL: func.func public @main
// F16-SAME:    () -> (tensor<70000xf16>, tensor<f32>)
// F16-NEXT:    [[I:%.*]] = stablehlo.iota dim = 0 : tensor<70000xf32>
// F16-NEXT:    [[Q:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<70000xf32>
// F16-NEXT:    [[D:%.*]] = stablehlo.multiply [[I]], [[Q]] : tensor<70000xf32>
// F16-NEXT:    [[H:%.*]] = stablehlo.convert [[D]] : (tensor<70000xf32>) -> tensor<70000xf16>
// F16-NEXT:    [[FOUR:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// F16-NEXT:    return [[H]], [[FOUR]]
func.func public @main() -> tensor<70000xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<70000xf32>
  return %0 : tensor<70000xf32>
}
