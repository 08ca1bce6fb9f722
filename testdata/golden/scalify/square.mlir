// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Square family (chlo.square): the op on the data, the result scale is the
// square of the operand scale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[SQ:%.*]] = chlo.square [[X]] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.multiply [[XS]], [[XS]] : tensor<f32>
// CHECK-NEXT:    return [[SQ]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.square %arg0 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A static scale squares at rewrite time: 3.0 is data 1.5 at 2^1, its square
// has the static scale 2^2 and no runtime scale op.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[SQ:%.*]] = chlo.square [[C]] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[SQ]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<3.0> : tensor<4xf32>
  %0 = chlo.square %cst : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
