// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Square family (chlo.square): the op on the data, the result's i32 exponent
// is twice the operand's (x_s's exponent e, from its bits, times 2). At the
// result it becomes the f32 scale 2^clamp(2 e, -126, 127), the excess
// multiplied into the data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[SQ:%.*]] = chlo.square [[X]] : tensor<4xf32> -> tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[E:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[E2:%.*]] = stablehlo.multiply [[E]], [[TWO]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[E2]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[E2]], [[H]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp {{%.*}}, [[EXCESS]], {{%.*}} : tensor<i32>
// CHECK:         [[SQ1:%.*]] = stablehlo.multiply [[SQ]], {{%.*}} : tensor<4xf32>
// CHECK-NEXT:    [[HB:%.*]] = stablehlo.add [[H]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[HBITS:%.*]] = stablehlo.shift_left [[HB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.bitcast_convert [[HBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[SQ1]], [[S]] : tensor<4xf32>, tensor<f32>
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
