// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},simplify' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16},simplify' | filecheck %s --check-prefix BF16

// A moving average's momentum: 0.99 is 0.99023 in f16 (0.98828 in bf16), and a product with
// the rounded constant is off the same way for every element, step after step (a running
// statistic's fixed point moves by 2.4% in f16, 15% in bf16). The product runs in f32 on the
// exact constant (1.98 at scale 2^-1) and is rounded once to the data type.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf16>, %arg1: tensor<f32>)
// CHECK-DAG:     [[C:%.*]] = stablehlo.constant dense<1.980000e+00> : tensor<4xf32>
// CHECK-DAG:     [[V:%.*]] = stablehlo.convert %arg0 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         [[P:%.*]] = stablehlo.multiply [[C]], [[V]] : tensor<4xf32>
// CHECK-NEXT:    stablehlo.convert [[P]] : (tensor<4xf32>) -> tensor<4xf16>

// BF16-LABEL: func.func public @main
// BF16-DAG:     [[C:%.*]] = stablehlo.constant dense<1.980000e+00> : tensor<4xf32>
// BF16-DAG:     [[V:%.*]] = stablehlo.convert %arg0 : (tensor<4xbf16>) -> tensor<4xf32>
// BF16:         [[P:%.*]] = stablehlo.multiply [[C]], [[V]] : tensor<4xf32>
// BF16-NEXT:    stablehlo.convert [[P]] : (tensor<4xf32>) -> tensor<4xbf16>
func.func public @main(%v: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0.99> : tensor<4xf32>
  %0 = stablehlo.multiply %c, %v : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant the data type holds exactly (0.75 is 1.5 at scale 2^-1) multiplies in the data
// type: nothing to gain from f32.

// CHECK-LABEL: func.func public @main
// CHECK:         [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf16>
// CHECK-NEXT:    stablehlo.multiply %arg0, [[C]] : tensor<4xf16>

// BF16-LABEL: func.func public @main
// BF16:         [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xbf16>
// BF16-NEXT:    stablehlo.multiply %arg0, [[C]] : tensor<4xbf16>
func.func public @main(%v: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0.75> : tensor<4xf32>
  %0 = stablehlo.multiply %v, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A quotient by a broadcast splat (0.3: 1.2 at scale 2^-2) that the data type rounds, the
// same way: in f32, one rounding.

// CHECK-LABEL: func.func public @main
// CHECK-DAG:     [[C:%.*]] = stablehlo.constant dense<1.200000e+00> : tensor<4xf32>
// CHECK-DAG:     [[V:%.*]] = stablehlo.convert %arg0 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         [[Q:%.*]] = stablehlo.divide [[V]], [[C]] : tensor<4xf32>
// CHECK-NEXT:    stablehlo.convert [[Q]] : (tensor<4xf32>) -> tensor<4xf16>

// BF16-LABEL: func.func public @main
// BF16:         stablehlo.divide {{.*}} : tensor<4xf32>
func.func public @main(%v: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0.3> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %0 = stablehlo.divide %v, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
