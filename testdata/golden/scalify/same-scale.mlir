// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f32 common-scale=first}' | filecheck %s --check-prefix FIRST
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16

// Same-scale family: the op runs on the data, float operands first brought to
// one common power-of-two scale (each data multiplied by 2^(e - E), e its i32
// exponent and E the common one), and the result carries that scale. The
// FIRST prefix checks every case but the last; the F16 prefix checks the
// first two and the last.
//
// maximum and select of two unrelated runtime scales are one of their
// operands: they run at the midpoint E = (e1 + e2) >> 1 of the exponents in a
// type that holds both (f32 for f16 data), and the result's own amax sets its
// scale, under every option (far-apart.mlir checks them in detail).

// Two operands with different runtime scales: the exponents' midpoint, the
// maximum in f32, and a reduction of |max| for the result's scale.
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.shift_right_arithmetic
// CHECK:         [[M:%.*]] = stablehlo.maximum {{.*}} : tensor<4xf32>
// CHECK:         stablehlo.reduce({{.*}} applies stablehlo.maximum
// FIRST-LABEL: func.func public @main
// FIRST:         stablehlo.shift_right_arithmetic
// FIRST:         [[M:%.*]] = stablehlo.maximum {{.*}} : tensor<4xf32>
// FIRST:         stablehlo.reduce({{.*}} applies stablehlo.maximum
// F16-LABEL: func.func public @main
// F16:         stablehlo.shift_right_arithmetic
// F16:         stablehlo.convert {{.*}} : (tensor<4xf16>) -> tensor<4xf32>
// F16:         [[M:%.*]] = stablehlo.maximum {{.*}} : tensor<4xf32>
// F16:         stablehlo.reduce({{.*}} applies stablehlo.maximum
// F16:         stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf16>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.maximum %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// relu: a zero constant is the same at every scale, so it never forces a
// rescale, not even a runtime midpoint or maximum of exponents; the scale is
// passed through as the argument itself.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf32>
// CHECK-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// FIRST-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// FIRST-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf32>
// FIRST-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf16>
// F16-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf16>
// F16-NEXT:    return [[M]], [[XS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// One operand: the op on the data, the scale passes through untouched.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<2x8xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<16xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reshape [[X]] : (tensor<2x8xf32>) -> tensor<16xf32>
// CHECK-NEXT:    return [[R]], [[XS]] : tensor<16xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<2x8xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<16xf32>, tensor<f32>)
// FIRST-NEXT:    [[R:%.*]] = stablehlo.reshape [[X]] : (tensor<2x8xf32>) -> tensor<16xf32>
// FIRST-NEXT:    return [[R]], [[XS]] : tensor<16xf32>, tensor<f32>
func.func public @main(%arg0: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<2x8xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<2x4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4x2xf32>, tensor<f32>)
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[X]], dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    return [[T]], [[XS]] : tensor<4x2xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<2x4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4x2xf32>, tensor<f32>)
// FIRST-NEXT:    [[T:%.*]] = stablehlo.transpose [[X]], dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
// FIRST-NEXT:    return [[T]], [[XS]] : tensor<4x2xf32>, tensor<f32>
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<4x2xf32> {
  %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<3x4xf32>, tensor<f32>)
// CHECK-NEXT:    [[B:%.*]] = stablehlo.broadcast_in_dim [[X]], dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    return [[B]], [[XS]] : tensor<3x4xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<3x4xf32>, tensor<f32>)
// FIRST-NEXT:    [[B:%.*]] = stablehlo.broadcast_in_dim [[X]], dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
// FIRST-NEXT:    return [[B]], [[XS]] : tensor<3x4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<3x4xf32> {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// select: the i1 predicate is not scaled; for two branches with unrelated
// runtime scales, each element's binade (its data's exponent bits plus its
// branch's scale exponent, in i32) is picked and one integer max sets the
// result's scale; only then are the branches' data shifted to it and selected,
// exact at any spread (see far-apart.mlir). Under common-scale=first too: the
// first branch's scale drifted by the ratio of the two in a loop that selects
// between a new and an old value, igamma's.

// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.select %arg0, {{.*}} : tensor<4xi1>, tensor<4xi32>
// CHECK:         stablehlo.reduce({{.*}} applies stablehlo.maximum {{.*}} : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
// CHECK:         stablehlo.select %arg0, {{.*}} : tensor<4xi1>, tensor<4xf32>
// FIRST-LABEL: func.func public @main
// FIRST:         stablehlo.select %arg0, {{.*}} : tensor<4xi1>, tensor<4xi32>
// FIRST:         stablehlo.reduce({{.*}} applies stablehlo.maximum {{.*}} : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
// FIRST:         stablehlo.select %arg0, {{.*}} : tensor<4xi1>, tensor<4xf32>
func.func public @main(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A float made from another type (the f32 abs of a complex value) has no scale
// to carry: the op runs as it is and its result is encoded at scale 1, in the
// data type (f16 here: the op itself keeps its f32 result).

// F16-LABEL: func.func public @main({{%[^:]+}}: tensor<4xcomplex<f32>>)
// F16-SAME:    -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[A:%.*]] = stablehlo.abs {{%[^ ]+}} : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
// F16-NEXT:    [[D:%.*]] = stablehlo.convert [[A]] : (tensor<4xf32>) -> tensor<4xf16>
// F16:         return [[D]], {{%.*}} : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xcomplex<f32>>) -> tensor<4xf32> {
  %0 = stablehlo.abs %arg0 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant branch of a select follows the runtime branch's scale, but only
// down to the lowest scale at which the constant's data stays in the data
// type's range: 2^-14 for 1.0 in f16 (data below 2 times 2^14). Below it, 1.0
// would saturate to inf (a zero tensor's norm has the f16 zero scale 2^-126).

// F16-LABEL: func.func public @main({{%[^:]+}}: tensor<4xi1>, {{%[^:]+}}: tensor<4xf16>, {{%[^:]+}}: tensor<f32>)
// F16:         [[E:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<i32>
// F16-NEXT:    [[FLOOR:%.*]] = stablehlo.constant dense<-14> : tensor<i32>
// F16-NEXT:    [[COMMON:%.*]] = stablehlo.maximum [[E]], [[FLOOR]] : tensor<i32>
// F16:         stablehlo.select
func.func public @main(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
  %0 = stablehlo.select %arg0, %arg1, %cst : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A sentinel beyond f16's range at scale 1 (a mask's -1e9) takes the runtime
// branch's scale, instead of pushing the runtime data below f16's normal range,
// and saturates to f16's largest finite value, which keeps its sign and order.
// Not to -inf: a softmax over a row with every key masked (attention with a
// padding mask) is then -M - (-M) = 0, as in the original, not -inf - (-inf) =
// NaN. The scale goes no lower than 2^-8, where the saturated sentinel is still
// -65504 * 2^-8 = -256: exp of it is 0, so scores far below 1 (zero-initialized
// queries) keep the masked keys out of a softmax.

// F16-LABEL: func.func public @main({{%[^:]+}}: tensor<4xi1>, {{%[^:]+}}: tensor<4xf16>,
// F16-SAME:    [[S:%[^:]+]]: tensor<f32>)
// F16:         [[FLOOR:%.*]] = stablehlo.constant dense<-8> : tensor<i32>
// F16-NEXT:    stablehlo.maximum {{%.*}}, [[FLOOR]] : tensor<i32>
// F16:         [[LOW:%.*]] = stablehlo.constant dense<-6.550400e+04> : tensor<f32>
// F16-NEXT:    [[HIGH:%.*]] = stablehlo.constant dense<6.550400e+04> : tensor<f32>
// F16-NEXT:    [[SAT:%.*]] = stablehlo.clamp [[LOW]], {{%.*}}, [[HIGH]]
// F16-NEXT:    [[C:%.*]] = stablehlo.convert [[SAT]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    [[SEL:%.*]] = stablehlo.select {{%.*}}, {{%.*}}, [[C]] : tensor<4xi1>, tensor<4xf16>
// F16:         return {{%.*}}, {{%.*}} : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<-1.000000e+09> : tensor<4xf32>
  %0 = stablehlo.select %arg0, %arg1, %cst : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}
