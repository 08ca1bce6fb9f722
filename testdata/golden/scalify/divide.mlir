// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Divide family: the op on the data, the result scale is the quotient of the
// operand scales.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[D:%.*]] = stablehlo.divide [[X]], [[Y]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.divide [[XS]], [[YS]] : tensor<f32>
// CHECK-NEXT:    return [[D]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.divide %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// x / 3.0: the constant is data 1.5 at the static scale 2^1, so the result
// scale is x_s * 2^-1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.divide [[X]], [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[HALF:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.multiply [[XS]], [[HALF]] : tensor<f32>
// CHECK-NEXT:    return [[D]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<3.0> : tensor<4xf32>
  %0 = stablehlo.divide %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// 1 / x: the reciprocal scale 1 / x_s.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.divide [[C]], [[X]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.divide [[ONE]], [[XS]] : tensor<f32>
// CHECK-NEXT:    return [[D]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.divide %cst, %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
