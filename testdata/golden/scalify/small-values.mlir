// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' \
// RUN:   | filecheck %s --check-prefix F32

// A bounded nonlinear op that vanishes linearly at 0 (|f(x)| <= 2|x|: tanh, sine, erf,
// asin, atan, asinh) stores its f16 results one binade above its operand's scale where
// that is below 1, not at 1: tanh of x at 2^-20 kept the 4 bits of an f16 subnormal (1.4%
// off) and flushed x below 2^-25. The results' data is at most the operand's in
// magnitude. A runtime operand scale gives the runtime scale clamp(e + 1, -15, 0) for tanh:
// 2^-15 still holds tanh(inf) = 1, whose operand's data is inf at any scale.

// CHECK-LABEL: func.func public @tanh_of_an_argument
// CHECK-SAME:    ({{%.*}}: tensor<4xf16>, [[XS:%.*]]: tensor<f32>)
// CHECK:         [[E:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[E1:%.*]] = stablehlo.add [[E]], [[ONE]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-15> : tensor<i32>
// CHECK-NEXT:    [[ZERO:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.clamp [[LO]], [[E1]], [[ZERO]] : tensor<i32>
// CHECK:         [[T:%.*]] = stablehlo.tanh {{%.*}} : tensor<4xf32>
// CHECK-NEXT:    [[NS:%.*]] = stablehlo.negate [[S]] : tensor<i32>
// CHECK:         [[F:%.*]] = stablehlo.broadcast_in_dim {{%.*}}, dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.multiply [[T]], [[F]] : tensor<4xf32>
// CHECK-NEXT:    {{%.*}} = stablehlo.convert [[D]] : (tensor<4xf32>) -> tensor<4xf16>

// F32-LABEL: func.func public @tanh_of_an_argument
// F32:         [[T:%.*]] = stablehlo.tanh {{%.*}} : tensor<4xf32>
// F32-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// F32-NEXT:    return [[T]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @tanh_of_an_argument(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A sine of a small static scale: iota * 2^-20, computed from constants alone, is a
// schedule (schedule_values.constant_expressions) and so is its sine: both hold f32 data,
// as the original computes them, and the sine is handed on in f32 at scale 1, exact.

// CHECK-LABEL: func.func public @sine_of_a_small_static_scale
// CHECK:         [[I:%.*]] = stablehlo.iota dim = 0 : tensor<4xf32>
// CHECK:         [[T:%.*]] = stablehlo.sine {{%.*}} : tensor<4xf32>
// CHECK:         return [[T]], {{%.*}} : tensor<4xf32>, tensor<f32>
func.func public @sine_of_a_small_static_scale() -> tensor<4xf32> {
  %i = stablehlo.iota dim = 0 : tensor<4xf32>
  %c = stablehlo.constant dense<9.53674316E-7> : tensor<4xf32>
  %0 = stablehlo.multiply %i, %c : tensor<4xf32>
  %1 = stablehlo.sine %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// cos(x) is 1 near 0: it is computed at scale 1, not shifted. Its operand, an argument
// times a constant, is an angle: the argument's data is f32.

// CHECK-LABEL: func.func public @cosine_is_not_small
// CHECK-SAME:    ({{%.*}}: tensor<4xf32>, {{%.*}}: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// CHECK:         [[T:%.*]] = stablehlo.cosine {{%.*}} : tensor<4xf32>
// CHECK-NEXT:    {{%.*}} = stablehlo.abs [[T]] : tensor<4xf32>
func.func public @cosine_is_not_small(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<9.53674316E-7> : tensor<4xf32>
  %0 = stablehlo.multiply %arg0, %c : tensor<4xf32>
  %1 = stablehlo.cosine %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
