// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Divide family: the op on the data; the result exponent is the difference of
// the operands' i32 exponents (an i32 subtract, no f32 divide of scales).
// At the result it becomes the f32 scale 2^clamp(e, -126, 127), the excess
// 2^(e - clamp) multiplied into the data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[D:%.*]] = stablehlo.divide [[X]], [[Y]] : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[YE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.subtract [[XE]], [[YE]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[E]], [[H]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp {{%.*}}, [[EXCESS]], {{%.*}} : tensor<i32>
// CHECK:         [[D1:%.*]] = stablehlo.multiply [[D]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[D1]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.divide %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// x / 3.0: the constant is data 1.5 at the static scale 2^1, so the quotient is at x's
// scale times 2^-1, a static power: no exponent arithmetic. Returned with x's type, it is
// handed back at x's own scale (hand-back.mlir): its data times 2^-1, x's scale as it came.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.divide [[X]], [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<4xf32>
// CHECK-NEXT:    [[D1:%.*]] = stablehlo.multiply [[D]], [[H]] : tensor<4xf32>
// CHECK-NEXT:    return [[D1]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<3.0> : tensor<4xf32>
  %0 = stablehlo.divide %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// 1 / x: the reciprocal's exponent is the negated exponent of x.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.divide [[C]], [[X]] : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.negate [[XE]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[E]], [[H]] : tensor<i32>
// CHECK:         [[D1:%.*]] = stablehlo.multiply [[D]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[D1]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.divide %cst, %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
