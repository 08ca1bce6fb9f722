// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Compare family: operands brought to a common scale, then compared on the
// data. The i1 result has no scale, so the result is one value, not a pair.

// Two runtime scales: y's data is brought to x's scale (common-scale=first).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> tensor<4xi1>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[YS]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.compare GT, [[X]], [[Y1]], FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    return [[C]] : tensor<4xi1>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xi1> {
  %0 = stablehlo.compare GT, %arg0, %arg1, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// x > 0: the zero constant needs no rescale, and x's scale is not used at all.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> tensor<4xi1>
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.compare GT, [[X]], [[Z]], FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    return [[C]] : tensor<4xi1>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xi1> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0 = stablehlo.compare GT, %arg0, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// x < 0.5: the constant (data 1.0 at the static scale 2^-1) is brought to x's
// runtime scale by the factor 2^-1 / x_s.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> tensor<4xi1>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[INV:%.*]] = stablehlo.divide [[ONE]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[HALF:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.multiply [[INV]], [[HALF]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.multiply [[C]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[LT:%.*]] = stablehlo.compare LT, [[X]], [[C1]], FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    return [[LT]] : tensor<4xi1>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xi1> {
  %cst = stablehlo.constant dense<0.5> : tensor<4xf32>
  %0 = stablehlo.compare LT, %arg0, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}
