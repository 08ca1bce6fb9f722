// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16

// Convert family. float -> narrower float: the value is rounded exactly as the
// original rounds it (unscale, round trip through the target type, rescale),
// and the scale is kept. float -> int: unscaled first. int -> float: scale 1.
// A convert to the data dtype itself, or a widening, is free. The F16 prefix
// checks only the first two cases.

// f32 -> bf16 with f32 data: x_d * x_s rounded through bf16, then divided by
// x_s again; the result keeps x's scale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[SB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[SB]] : tensor<4xf32>
// CHECK-NEXT:    [[UB:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT:    [[UW:%.*]] = stablehlo.convert [[UB]] : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[INV:%.*]] = stablehlo.divide [[ONE]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[IB:%.*]] = stablehlo.broadcast_in_dim [[INV]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.multiply [[UW]], [[IB]] : tensor<4xf32>
// CHECK-NEXT:    return [[D]], [[XS]] : tensor<4xf32>, tensor<f32>

// f16 data: the same, the unscaling done in f32 and the result converted to
// the f16 data dtype.

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[W:%.*]] = stablehlo.convert [[X]] : (tensor<4xf16>) -> tensor<4xf32>
// F16-NEXT:    [[SB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// F16-NEXT:    [[U:%.*]] = stablehlo.multiply [[W]], [[SB]] : tensor<4xf32>
// F16-NEXT:    [[UB:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xbf16>
// F16-NEXT:    [[UW:%.*]] = stablehlo.convert [[UB]] : (tensor<4xbf16>) -> tensor<4xf32>
// F16-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// F16-NEXT:    [[INV:%.*]] = stablehlo.divide [[ONE]], [[XS]] : tensor<f32>
// F16-NEXT:    [[IB:%.*]] = stablehlo.broadcast_in_dim [[INV]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// F16-NEXT:    [[D:%.*]] = stablehlo.multiply [[UW]], [[IB]] : tensor<4xf32>
// F16-NEXT:    [[DH:%.*]] = stablehlo.convert [[D]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    return [[DH]], [[XS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xbf16> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// f32 -> f16: with f32 data, rounded through f16 like bf16 above. With f16
// data the target is the data dtype and the pair passes through untouched: the
// data already has f16 precision, and its scale keeps it clear of the f16
// overflow the unscaled value would hit.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[SB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[SB]] : tensor<4xf32>
// CHECK-NEXT:    [[UH:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-NEXT:    [[UW:%.*]] = stablehlo.convert [[UH]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[INV:%.*]] = stablehlo.divide [[ONE]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[IB:%.*]] = stablehlo.broadcast_in_dim [[INV]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.multiply [[UW]], [[IB]] : tensor<4xf32>
// CHECK-NEXT:    return [[D]], [[XS]] : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    return [[X]], [[XS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf16> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// float -> int: the integer part of the unscaled value, as in the original.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> tensor<4xi32>
// CHECK-NEXT:    [[SB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[SB]] : tensor<4xf32>
// CHECK-NEXT:    [[I:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK-NEXT:    return [[I]] : tensor<4xi32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xi32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// int -> float: data at scale 1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[I:%.*]]: tensor<4xi32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[F:%.*]] = stablehlo.convert [[I]] : (tensor<4xi32>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[F]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xi32>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// bf16 -> f32 widening is exact: nothing is emitted, the pair passes through.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    return [[X]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xbf16>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
