// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Multiply family: the op on the data, the result scale is the product of the
// operand scales (one rank-0 multiply, no tensor-sized work).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[X]], [[Y]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.multiply [[XS]], [[YS]] : tensor<f32>
// CHECK-NEXT:    return [[M]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant 0.1 becomes data 1.6 with the static scale 2^-4, which folds
// into the result scale: x_s * 0.0625.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[X]], [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.constant dense<6.250000e-02> : tensor<f32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.multiply [[XS]], [[E]] : tensor<f32>
// CHECK-NEXT:    return [[M]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
  %0 = stablehlo.multiply %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Scales stay symbolic through a chain: x * y * x has scale x_s^2 * y_s, only
// materialized at the return.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[M1:%.*]] = stablehlo.multiply [[X]], [[Y]] : tensor<4xf32>
// CHECK-NEXT:    [[M2:%.*]] = stablehlo.multiply [[M1]], [[X]] : tensor<4xf32>
// CHECK-NEXT:    [[XS2:%.*]] = stablehlo.multiply [[XS]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.multiply [[XS2]], [[YS]] : tensor<f32>
// CHECK-NEXT:    return [[M2]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<4xf32>
  %1 = stablehlo.multiply %0, %arg0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
