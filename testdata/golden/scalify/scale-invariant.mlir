// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Scale-invariant family (sign, atan2): f(c*x) = f(x) for a positive c, so the
// op runs on the data (its operands at a common scale) and the result has
// scale 1.

// sign: the one operand is already at its own scale; nothing is rescaled.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[S:%.*]] = stablehlo.sign [[X]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[S]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sign %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// atan2(y, x): x's data is brought to y's scale first.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[XS]], [[YS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.atan2 [[Y]], [[X1]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[A]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.atan2 %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
