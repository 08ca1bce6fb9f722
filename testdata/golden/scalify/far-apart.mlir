// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},simplify{pack-scales=none}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32},simplify{pack-scales=none}' \
// RUN:   | filecheck %s --check-prefix F32

// select, max, min, clamp and compare with operands whose scales may be far apart
// (issue 22, section 5): the result is one of the operands (or a boolean), so it must not
// depend on the spread. f16 data cannot hold two operands 2^30 apart at one scale: the
// largest scale flushed the other to 0 (min(SA([-1, 2], 4), SA([1, 1], 2^30)) was [0, 0]).

// Two runtime scales, f16 data: the min is taken in f32 at the midpoint of the exponents
// (exact at any spread), and the result's own amax sets its scale, so a result taken from
// one operand keeps that operand's values. f32 data the same (in f32): a loop-carried
// select(enabled, new, old) of igamma's series kept the first operand's scale and drifted
// by the ratio of the two every trip, to NaN (issue 22, section 7).
// CHECK-LABEL: func.func public @main
// CHECK:         [[E:%.*]] = stablehlo.shift_right_arithmetic
// CHECK:         stablehlo.convert %arg0 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         stablehlo.convert %arg2 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         [[M:%.*]] = stablehlo.minimum {{.*}} : tensor<4xf32>
// CHECK:         [[A:%.*]] = stablehlo.abs [[M]]
// CHECK:         stablehlo.reduce([[A]] {{.*}} applies stablehlo.maximum
// CHECK:         stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf16>
// F32-LABEL: func.func public @main
// F32:         stablehlo.shift_right_arithmetic
// F32:         [[M:%.*]] = stablehlo.minimum {{.*}} : tensor<4xf32>
// F32:         [[A:%.*]] = stablehlo.abs [[M]]
// F32:         stablehlo.reduce([[A]] {{.*}} applies stablehlo.maximum
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.minimum %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// compare: both operands at the midpoint in a type that holds them (f32 for f16 data), so
// a small operand beside a large one's zero is still greater than it. No reduction.
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.shift_right_arithmetic
// CHECK:         stablehlo.compare GT, {{.*}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NOT:     stablehlo.reduce
// F32-LABEL: func.func public @main
// F32:         stablehlo.shift_right_arithmetic
// F32:         stablehlo.compare GT
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xi1> {
  %0 = stablehlo.compare GT, %arg0, %arg1, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// A predicate that is one value for all elements picks a whole branch: its data and its
// exponent as they are (a select of the data, a select of the i32 exponents), exact at any
// spread, with no rescale at all.
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.select %arg0, %arg1, %arg3 : tensor<i1>, tensor<4xf16>
// CHECK:         stablehlo.select %arg0, {{.*}} : tensor<i1>, tensor<i32>
// CHECK-NOT:     stablehlo.reduce
// F32-LABEL: func.func public @main
// F32:         stablehlo.select %arg0, %arg1, %arg3 : tensor<i1>, tensor<4xf32>
// F32:         stablehlo.select %arg0, {{.*}} : tensor<i1>, tensor<i32>
func.func public @main(%arg0: tensor<i1>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// relu: a zero constant is valid at any scale, so the max stays free: the op on the data,
// the argument's scale handed back, nothing else.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf16>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.maximum %arg0, [[Z]] : tensor<4xf16>
// CHECK-NEXT:    return [[R]], %arg1
// F32-LABEL: func.func public @main
// F32-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// F32-NEXT:    [[R:%.*]] = stablehlo.maximum %arg0, [[Z]] : tensor<4xf32>
// F32-NEXT:    return [[R]], %arg1
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// One runtime scale beside a constant (jnp.minimum(x, 1.0)), f16 data: the min takes 1.0
// only where x passes it, so the constant follows x's scale with no floor, saturated to
// +-65504 where it passes f16's range (x's values at 2^-40 stay, where a floor flushed
// them); x's data is untouched, and no reduction: the common case adds no kernel.
// CHECK-LABEL: func.func public @main
// CHECK-DAG:     [[TOP:%.*]] = stablehlo.constant dense<6.550400e+04> : tensor<f32>
// CHECK-DAG:     [[BOTTOM:%.*]] = stablehlo.constant dense<-6.550400e+04> : tensor<f32>
// CHECK:         [[C:%.*]] = stablehlo.clamp [[BOTTOM]], {{.*}}, [[TOP]]
// CHECK:         [[C16:%.*]] = stablehlo.convert [[C]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK:         [[R:%.*]] = stablehlo.minimum %arg0, [[C16]] : tensor<4xf16>
// CHECK:         return [[R]], %arg1
// CHECK-NOT:     stablehlo.reduce
// F32-LABEL: func.func public @main
// F32:         stablehlo.minimum {{.*}} : tensor<4xf32>
// F32-NOT:     stablehlo.reduce
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
  %0 = stablehlo.minimum %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A max reduce whose init is a sentinel (lax.reduce(x, finfo(f32).min, max)), f16 data: the
// init is taken only where every value is below it, so it follows x's scale, saturated,
// where the common scale's maximum put the init's 2^128 on x and every value came out 0.
// CHECK-LABEL: func.func public @main
// CHECK-DAG:     [[BOTTOM:%.*]] = stablehlo.constant dense<-6.550400e+04> : tensor<f32>
// CHECK:         [[INIT:%.*]] = stablehlo.clamp [[BOTTOM]]
// CHECK:         [[I16:%.*]] = stablehlo.convert [[INIT]] : (tensor<f32>) -> tensor<f16>
// CHECK:         [[R:%.*]] = stablehlo.reduce(%arg0 init: [[I16]]) applies stablehlo.maximum
// CHECK:         return [[R]], %arg1
// F32-LABEL: func.func public @main
// F32:         stablehlo.reduce({{.*}}) applies stablehlo.maximum
func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3xf32> {
  %cst = stablehlo.constant dense<-3.40282347E+38> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// A masked max, jnp.max(where(mask, x, finfo(f32).min)), f16 data: read only by a max
// reduce, the select takes its sentinel only where the reduce would take it past the data,
// so the sentinel saturates at x's scale and x keeps its data, where the sentinel's floor
// raised x's scale and x at 2^-40 came out 0.
// CHECK-LABEL: func.func public @main
// CHECK-DAG:     [[BOTTOM:%.*]] = stablehlo.constant dense<-6.550400e+04> : tensor<f32>
// CHECK:         [[SAT:%.*]] = stablehlo.clamp [[BOTTOM]]
// CHECK:         [[S16:%.*]] = stablehlo.convert [[SAT]] : (tensor<3x4xf32>) -> tensor<3x4xf16>
// CHECK:         [[SEL:%.*]] = stablehlo.select %arg2, %arg0, [[S16]]
// CHECK:         [[R:%.*]] = stablehlo.reduce([[SEL]] init: {{%.*}}) applies stablehlo.maximum
// CHECK:         return [[R]], %arg1
// F32-LABEL: func.func public @main
// F32:         stablehlo.reduce({{.*}}) applies stablehlo.maximum
func.func public @main(%arg0: tensor<3x4xf32>, %arg1: tensor<3x4xi1>) -> tensor<3xf32> {
  %min = stablehlo.constant dense<-3.40282347E+38> : tensor<3x4xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %s = stablehlo.select %arg1, %arg0, %min : tensor<3x4xi1>, tensor<3x4xf32>
  %0 = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// igamma's series, reduced (issue 22, section 7): a loop-carried select(enabled, new, old)
// where new = old * z. The branches' scales differ by z's every trip; taking the first
// branch's (common-scale=first, the f32 default) or the midpoint drifted the carried scale
// away from the values, and the old branch's data overflowed (NaN in 246 of 400 igamma
// values). The carried scale now follows the picked values, inside the body: the largest
// binade of the picked elements (bits plus scale exponent, in i32, one integer max), then
// the data select at that scale.
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.while
// CHECK:         stablehlo.reduce({{.*}} applies stablehlo.maximum {{.*}} : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
// CHECK:         stablehlo.select {{.*}} : tensor<4xi1>, tensor<4xf32>
// CHECK:         stablehlo.return
// F32-LABEL: func.func public @main
// F32:         stablehlo.while
// F32:         stablehlo.reduce({{.*}} applies stablehlo.maximum {{.*}} : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
// F32:         stablehlo.select {{.*}} : tensor<4xi1>, tensor<4xf32>
// F32:         stablehlo.return
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xi1>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c, %x = %arg0) : tensor<i32>, tensor<4xf32>
  cond {
    %n = stablehlo.constant dense<8> : tensor<i32>
    %1 = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %i, %one : tensor<i32>
    %2 = stablehlo.multiply %x, %arg1 : tensor<4xf32>
    %3 = stablehlo.select %arg2, %2, %x : tensor<4xi1>, tensor<4xf32>
    stablehlo.return %1, %3 : tensor<i32>, tensor<4xf32>
  }
  return %0#1 : tensor<4xf32>
}

// -----

// select of two branches whose runtime scales are unrelated and may be 2^600 apart (issue 22,
// section 7: bessel_i0e's discarded Clenshaw branch is y^30, 2^400 from the picked one in
// the i32 exponents). Taking the select at the midpoint of the exponents flushed the picked
// branch's data to 0 (or overflowed it) before any amax could see it. Now each element's
// binade (exponent bits of the data plus its branch's scale exponent) is picked in i32, one
// integer max gives the result's scale, and only then is each branch's data shifted to it
// (three normal factors: no 0 * inf), so the picked values are exact at any spread. No f32
// amax of the data.
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.bitcast_convert {{.*}} : (tensor<4xf32>) -> tensor<4xi32>
// CHECK:         stablehlo.bitcast_convert {{.*}} : (tensor<4xf32>) -> tensor<4xi32>
// CHECK:         [[P:%.*]] = stablehlo.select %arg4, {{.*}} : tensor<4xi1>, tensor<4xi32>
// CHECK:         stablehlo.reduce([[P]] {{.*}} applies stablehlo.maximum
// CHECK:         [[D:%.*]] = stablehlo.select %arg4, {{.*}} : tensor<4xi1>, tensor<4xf32>
// CHECK:         stablehlo.convert [[D]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-NOT:     stablehlo.abs
// F32-LABEL: func.func public @main
// F32:         [[P:%.*]] = stablehlo.select %arg4, {{.*}} : tensor<4xi1>, tensor<4xi32>
// F32:         stablehlo.reduce([[P]] {{.*}} applies stablehlo.maximum
// F32:         stablehlo.select %arg4, {{.*}} : tensor<4xi1>, tensor<4xf32>
// F32-NOT:     stablehlo.abs
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xi1>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
  %1 = stablehlo.multiply %0, %arg0 : tensor<4xf32>
  %2 = stablehlo.select %arg2, %1, %arg1 : tensor<4xi1>, tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// jnp.clip(x, -1, 1) is min(max(x, -1), 1), StableHLO's definition of clamp. With f16 data
// the bounds followed x's runtime scale and flushed to 0 where it was 2^30 (the clip was 0
// where the original gives -1 or 1): the clamp now takes a scale its bounds fit at (x's,
// capped by the bounds' own: a minimum of exponents), and x is shifted to it in f32, where
// a value far past a bound is inf or large and the clamp makes it the bound. x reaches -1 and
// 1 only by passing them, so where x's scale is far below them they set no floor (x's values
// at 2^-40 stay): each is saturated at +-65504 there. f32 data holds the bounds at any scale
// of x: max then min, as before.
// CHECK-LABEL: func.func public @main
// CHECK:         [[E:%.*]] = stablehlo.minimum {{.*}} : tensor<i32>
// CHECK:         [[X:%.*]] = stablehlo.convert %arg0 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         [[LO:%.*]] = stablehlo.clamp {{.*}} : tensor<4xf32>
// CHECK:         [[HI:%.*]] = stablehlo.clamp {{.*}} : tensor<4xf32>
// CHECK:         [[C:%.*]] = stablehlo.clamp [[LO]], {{.*}}, [[HI]] : tensor<4xf32>
// CHECK:         stablehlo.convert [[C]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-NOT:     stablehlo.maximum {{.*}} : tensor<4xf16>
// CHECK-NOT:     stablehlo.minimum {{.*}} : tensor<4xf16>
// F32-LABEL: func.func public @main
// F32:         stablehlo.maximum {{.*}} : tensor<4xf32>
// F32:         stablehlo.minimum {{.*}} : tensor<4xf32>
// F32-NOT:     stablehlo.clamp {{.*}} : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<-1.000000e+00> : tensor<f32>
  %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %1 = stablehlo.maximum %0, %arg0 : tensor<4xf32>
  %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %3 = stablehlo.minimum %2, %1 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// A one-sided guard, max(x, 1e-6), beside x's runtime scale: the constant follows the scale
// (down to where it stays in range) and, where it would flush to 0 (x at 2^30), becomes
// f16's smallest subnormal, so the result keeps max(x, eps) > 0 and x / (max(x, eps) + x)
// of a zero is 0, not NaN. f32 data holds the constant at any scale: no guard.
// CHECK-LABEL: func.func public @main
// CHECK-DAG:     [[TINY:%.*]] = stablehlo.constant dense<5.960460e-08> : tensor<4xf16>
// CHECK:         [[C:%.*]] = stablehlo.maximum {{%.*}}, [[TINY]] : tensor<4xf16>
// CHECK:         stablehlo.maximum {{%.*}}, [[C]] : tensor<4xf16>
// F32-LABEL: func.func public @main
// F32-NOT:     stablehlo.constant dense<{{.*}}e-08>
// F32:         stablehlo.maximum {{.*}} : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<9.99999997E-7> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %1 = stablehlo.maximum %arg0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// The same guard beside data whose scale is static and 2^52 above it (iota * 1e9). Data
// computed from constants alone is a schedule (schedule_values.constant_expressions): it
// holds f32 data, as the original computes it, where the guard is not 0 (2^-49 * 1.05 at
// the data's scale), so v / (max(v, eps) + v) of v's zero is 0, not NaN; the quotient is
// rescaled by its amax where the f16 sum reads it.
// CHECK-LABEL: func.func public @main
// CHECK:         [[M:%.*]] = stablehlo.maximum {{%.*}}, {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.add [[M]], {{%.*}} : tensor<4xf32>
// CHECK:         [[D:%.*]] = stablehlo.divide {{%.*}}, [[S]] : tensor<4xf32>
// CHECK:         stablehlo.abs [[D]] : tensor<4xf32>
// CHECK:         stablehlo.convert {{%.*}} : (tensor<4xf32>) -> tensor<4xf16>
// F32-LABEL: func.func public @main
// F32-NOT:     stablehlo.constant dense<{{.*}}e-08>
// F32:         stablehlo.maximum {{.*}} : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %i = stablehlo.iota dim = 0 : tensor<4xf32>
  %cst = stablehlo.constant dense<1.000000e+09> : tensor<4xf32>
  %v = stablehlo.multiply %i, %cst : tensor<4xf32>
  %e = stablehlo.constant dense<9.99999997E-7> : tensor<4xf32>
  %m = stablehlo.maximum %v, %e : tensor<4xf32>
  %s = stablehlo.add %m, %v : tensor<4xf32>
  %d = stablehlo.divide %v, %s : tensor<4xf32>
  %r = stablehlo.add %d, %arg0 : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// jax.nn.hard_tanh: where(x > 1, 1, where(x < -1, -1, x)), two selects against compares,
// caps of either side of x by constants (the bounds are int constants converted to f32:
// split at rewrite time, no measurement): the same clamp at a scale its bounds fit at, each
// bound saturated at +-65504 where x's scale is far below it.
// CHECK-LABEL: func.func public @main
// CHECK-NOT:     stablehlo.reduce
// CHECK:         [[LO:%.*]] = stablehlo.clamp {{.*}} : tensor<4xf32>
// CHECK:         [[HI:%.*]] = stablehlo.clamp {{.*}} : tensor<4xf32>
// CHECK:         [[C:%.*]] = stablehlo.clamp [[LO]], {{.*}}, [[HI]] : tensor<4xf32>
// CHECK:         stablehlo.convert [[C]] : (tensor<4xf32>) -> tensor<4xf16>
// F32-LABEL: func.func public @main
// F32:         stablehlo.select
// F32:         stablehlo.select
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %cst_0 = stablehlo.constant dense<-1.000000e+00> : tensor<f32>
  %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %3 = stablehlo.compare LT, %arg0, %2, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %c = stablehlo.constant dense<-1> : tensor<i32>
  %c_1 = stablehlo.constant dense<1> : tensor<i32>
  %4 = stablehlo.convert %c : (tensor<i32>) -> tensor<f32>
  %5 = stablehlo.broadcast_in_dim %4, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %6 = stablehlo.select %3, %5, %arg0 : tensor<4xi1>, tensor<4xf32>
  %7 = stablehlo.convert %c_1 : (tensor<i32>) -> tensor<f32>
  %8 = stablehlo.broadcast_in_dim %7, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %9 = stablehlo.select %1, %8, %6 : tensor<4xi1>, tensor<4xf32>
  return %9 : tensor<4xf32>
}

// -----

// An additive attention mask, scores + where(mask, 0, -1e9): the bias is zeros and a
// sentinel whatever the mask holds. The sum takes the scores' scale (their data as is) and
// the sentinel saturates there, to half f16's largest finite value so that the sum stays
// finite; at the bias's own scale (2^29) every score flushed to 0 and the softmax over the
// unmasked keys was uniform. The scale goes no lower than 2^-7, where the saturated sentinel
// is still -32752 * 2^-7 = -256 (exp of it is 0: scores far below 1 keep the masked keys out
// of a softmax). f32 data holds both: the plain add.
// CHECK-LABEL: func.func public @main
// CHECK-DAG:     [[HI:%.*]] = stablehlo.constant dense<3.275200e+04> : tensor<f32>
// CHECK-DAG:     [[LO:%.*]] = stablehlo.constant dense<-3.275200e+04> : tensor<f32>
// CHECK-DAG:     [[FLOOR:%.*]] = stablehlo.constant dense<-7> : tensor<i32>
// CHECK:         [[E:%.*]] = stablehlo.maximum {{%.*}}, [[FLOOR]] : tensor<i32>
// CHECK:         [[B:%.*]] = stablehlo.clamp [[LO]], {{%.*}}, [[HI]]
// CHECK:         [[H:%.*]] = stablehlo.convert [[B]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK:         [[S:%.*]] = stablehlo.add {{%.*}}, [[H]] : tensor<4xf16>
// CHECK:         stablehlo.convert [[S]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         return {{%.*}}, {{%.*}} : tensor<4xf16>, tensor<f32>
// F32-LABEL: func.func public @main
// F32-NOT:     dense<{{-?}}3.275200e+04>
// F32:         stablehlo.add {{.*}} : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi1>) -> tensor<4xf32> {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
  %n = stablehlo.constant dense<-1.000000e+09> : tensor<4xf32>
  %b = stablehlo.select %arg1, %z, %n : tensor<4xi1>, tensor<4xf32>
  %0 = stablehlo.add %arg0, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The same bias as (1 - float(mask)) * finfo(f32).min: a boolean converted to float is 0 or
// 1, so the bias is again zeros and a sentinel (value_sets), and the scores keep their scale.
// CHECK-LABEL: func.func public @main
// CHECK:         [[B:%.*]] = stablehlo.clamp {{.*}} -> tensor<4xf32>
// CHECK:         [[H:%.*]] = stablehlo.convert [[B]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK:         [[S:%.*]] = stablehlo.add {{%.*}}, [[H]] : tensor<4xf16>
// CHECK:         stablehlo.convert [[S]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         return {{%.*}}, {{%.*}} : tensor<4xf16>, tensor<f32>
// F32-LABEL: func.func public @main
// F32-NOT:     dense<{{-?}}3.275200e+04>
// F32:         stablehlo.add {{.*}} : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi1>) -> tensor<4xf32> {
  %one = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
  %min = stablehlo.constant dense<-3.40282347E+38> : tensor<4xf32>
  %m = stablehlo.convert %arg1 : (tensor<4xi1>) -> tensor<4xf32>
  %k = stablehlo.subtract %one, %m : tensor<4xf32>
  %b = stablehlo.multiply %k, %min : tensor<4xf32>
  %0 = stablehlo.add %arg0, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// HF's bias of an int32 attention mask, (1 - float(mask)) * finfo(f32).min: the mask's
// values are unknown at rewrite time (its float is measured at run time), but a float made
// from integers times the sentinel is 0 or a multiple of the sentinel (value_sets.step): the
// scores keep their scale and the bias saturates at it.
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.convert %arg2 : (tensor<4xi32>) -> tensor<4xf32>
// CHECK:         [[B:%.*]] = stablehlo.clamp {{.*}} -> tensor<4xf32>
// CHECK:         [[H:%.*]] = stablehlo.convert [[B]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK:         [[S:%.*]] = stablehlo.add {{%.*}}, [[H]] : tensor<4xf16>
// CHECK:         stablehlo.convert [[S]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         return {{%.*}}, {{%.*}} : tensor<4xf16>, tensor<f32>
// F32-LABEL: func.func public @main
// F32:         stablehlo.add {{.*}} : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> tensor<4xf32> {
  %one = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
  %min = stablehlo.constant dense<-3.40282347E+38> : tensor<4xf32>
  %m = stablehlo.convert %arg1 : (tensor<4xi32>) -> tensor<4xf32>
  %k = stablehlo.subtract %one, %m : tensor<4xf32>
  %b = stablehlo.multiply %k, %min : tensor<4xf32>
  %0 = stablehlo.add %arg0, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
