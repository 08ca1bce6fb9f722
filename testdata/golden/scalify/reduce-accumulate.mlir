// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16}' \
// RUN:   | filecheck %s --check-prefix BF16

// A sum of f16 or bf16 data accumulates in f32, as the f32 original does (and as JAX sums
// f16): N same-sign values of unit scale pass f16's 65504 from N ~ 65k on. The sqrt(N)
// factor moves to the scale before the result is rounded to the data type.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x4xf16>, [[XS:%.*]]: tensor<f32>)
// CHECK:         [[W:%.*]] = stablehlo.convert [[X]] : (tensor<8x4xf16>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[INIT:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[SUM:%.*]] = stablehlo.reduce([[W]] init: [[INIT]]) applies stablehlo.add across dimensions = [1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK-NEXT:    [[HALF:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<8xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.multiply [[SUM]], [[HALF]] : tensor<8xf32>
// CHECK-NEXT:    stablehlo.convert [[D]] : (tensor<8xf32>) -> tensor<8xf16>

// BF16-LABEL: func.func public @main
// BF16:         stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
// BF16:         stablehlo.convert {{.*}} : (tensor<8xf32>) -> tensor<8xbf16>
func.func public @main(%arg0: tensor<8x4xf32>) -> tensor<8xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A max is exact in any data type: it stays in f16.

// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [1] : (tensor<8x4xf16>, tensor<f16>) -> tensor<8xf16>
// CHECK-NOT:     tensor<8xf32>
// CHECK:         return

// BF16-LABEL: func.func public @main
// BF16:         stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [1] : (tensor<8x4xbf16>, tensor<bf16>) -> tensor<8xbf16>
func.func public @main(%arg0: tensor<8x4xf32>) -> tensor<8xf32> {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
