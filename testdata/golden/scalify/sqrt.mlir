// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Sqrt family (sqrt, rsqrt): the scale exponent is halved (sqrt) or halved and
// negated (rsqrt). When it is odd, one factor 2 moves into the data first, so
// the result scale stays an exact power of two.

// Static even exponent: 16.0 is data 1.0 at 2^4; sqrt has scale 2^2, data
// untouched.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<16.0> : tensor<4xf32>
  %0 = stablehlo.sqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Static odd exponent: 9.0 is data 1.125 at 2^3; the data is doubled (2.25 at
// 2^2) and sqrt gives 1.5 at 2^1 = 3.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.125000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.multiply [[C]], [[TWO]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[C2]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<9.0> : tensor<4xf32>
  %0 = stablehlo.sqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// rsqrt of the same: rsqrt(2.25) at 2^-1 = 1/3.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.125000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.multiply [[C]], [[TWO]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.rsqrt [[C2]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<9.0> : tensor<4xf32>
  %0 = stablehlo.rsqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Negative odd exponent: 0.125 is data 1.0 at 2^-3; the data is doubled (2.0
// at 2^-4) and sqrt gives sqrt(2) at 2^-2.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.multiply [[C]], [[TWO]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[C2]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.125> : tensor<4xf32>
  %0 = stablehlo.sqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Runtime scale: from x_s's i32 exponent e, half = e >> 1 (arithmetic, so it
// rounds down: -3 >> 1 = -2) and odd = e - (half + half), 0 or 1; the data is
// multiplied by 2^odd (no clamp: the factor is 1 or 2) and the result exponent is
// half. At the result it becomes the f32 scale 2^clamp(half, -126, 127), the
// excess multiplied into the data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[E:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[HALF:%.*]] = stablehlo.shift_right_arithmetic [[E]], [[ONE]] : tensor<i32>
// CHECK-NEXT:    [[EVEN:%.*]] = stablehlo.add [[HALF]], [[HALF]] : tensor<i32>
// CHECK-NEXT:    [[ODD:%.*]] = stablehlo.subtract [[E]], [[EVEN]] : tensor<i32>
// CHECK-NEXT:    [[OB:%.*]] = stablehlo.add [[ODD]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[OBITS:%.*]] = stablehlo.shift_left [[OB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.bitcast_convert [[OBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FB:%.*]] = stablehlo.broadcast_in_dim [[F]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[FB]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[X1]] : tensor<4xf32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[HALF]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[HALF]], [[H]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp {{%.*}}, [[EXCESS]], {{%.*}} : tensor<i32>
// CHECK:         [[R1:%.*]] = stablehlo.multiply [[R]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R1]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sqrt %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// rsqrt with a runtime scale: the same split, result exponent -half.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[E:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[HALF:%.*]] = stablehlo.shift_right_arithmetic [[E]], [[ONE]] : tensor<i32>
// CHECK-NEXT:    [[EVEN:%.*]] = stablehlo.add [[HALF]], [[HALF]] : tensor<i32>
// CHECK-NEXT:    [[ODD:%.*]] = stablehlo.subtract [[E]], [[EVEN]] : tensor<i32>
// CHECK-NEXT:    [[OB:%.*]] = stablehlo.add [[ODD]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[OBITS:%.*]] = stablehlo.shift_left [[OB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.bitcast_convert [[OBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FB:%.*]] = stablehlo.broadcast_in_dim [[F]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[FB]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.rsqrt [[X1]] : tensor<4xf32>
// CHECK-NEXT:    [[NH:%.*]] = stablehlo.negate [[HALF]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[NH]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[NH]], [[H]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp {{%.*}}, [[EXCESS]], {{%.*}} : tensor<i32>
// CHECK:         [[R1:%.*]] = stablehlo.multiply [[R]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R1]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.rsqrt %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
