// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{delayed-statistics=use}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{delayed-statistics=measure}' | filecheck %s --check-prefix MEASURE
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline scalify | filecheck %s --check-prefix NONE
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{delayed-statistics=use},fp8-dots{delayed-statistics=use}' | filecheck %s --check-prefix FP8

// Delayed statistics: the entry function's rescale points apply the exponents of one more
// argument (the previous call's) and return the ones they measure as one more result, so
// that no data waits for a statistic (in a sharded step each statistic is an all-reduce, and
// chained they cannot be combined). The second dot reads the first point's data, shifted by
// the given exponent 0, not by anything measured. measure: the function applies what it
// measures and returns it (a first call); none: no extra argument or result. fp8-dots adds
// its dots' amax shifts after scalify's points: the first dot's two operands, then the second
// dot's left one; the weight both dots read in the same format takes one point (2 + 3).
// A fed-back call hands on, per rescale point, what it measured where that is larger than
// what it was given, else the given exponent while the data is at most 8 binades below it,
// and the given one less 1 beyond (a spike's exponent holds, so the data stays below f16's
// top when the spike returns); an FP8 cast's shift is handed on as measured.

// CHECK-LABEL: func.func @two_points
// CHECK-SAME:    %arg4: tensor<2xi32> {jax.arg_info = "delayed_exponents"}
// CHECK-SAME:    -> ({{.*}}, tensor<2xi32> {jax.result_info = "delayed_exponents"})
// CHECK-SAME:    scalify.delayed_exponents = 2
// CHECK:         [[G0:%.*]] = stablehlo.slice %arg4 [0:1]
// CHECK:         [[G1:%.*]] = stablehlo.slice %arg4 [1:2]
// CHECK:         [[D0:%.*]] = stablehlo.dot_general %arg0, %arg2
// CHECK:         [[S0:%.*]] = stablehlo.clamp {{.*}} : (tensor<f32>, tensor<4x8xf32>, tensor<f32>)
// CHECK:         [[F0:%.*]] = stablehlo.is_finite
// CHECK:         [[N0:%.*]] = stablehlo.convert {{.*}} : (tensor<4x8xf32>) -> tensor<4x8xf16>
// CHECK:         stablehlo.dot_general [[N0]], %arg2
// CHECK:         [[M:%.*]] = stablehlo.concatenate {{.*}} : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
// CHECK:         [[G:%.*]] = stablehlo.slice %arg4 [0:2]
// CHECK:         [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<2xi32>
// CHECK:         [[EIGHT:%.*]] = stablehlo.constant dense<8> : tensor<2xi32>
// CHECK:         [[DOWN:%.*]] = stablehlo.subtract [[G]], [[ONE]] : tensor<2xi32>
// CHECK:         [[SLACK:%.*]] = stablehlo.add [[M]], [[EIGHT]] : tensor<2xi32>
// CHECK:         [[LOWEST:%.*]] = stablehlo.maximum [[DOWN]], [[SLACK]] : tensor<2xi32>
// CHECK:         [[KEPT:%.*]] = stablehlo.minimum [[G]], [[LOWEST]] : tensor<2xi32>
// CHECK:         [[HELD:%.*]] = stablehlo.maximum [[M]], [[KEPT]] : tensor<2xi32>
// CHECK:         return {{.*}}, [[HELD]] : tensor<4x8xf16>, tensor<f32>, tensor<2xi32>
// MEASURE-LABEL: func.func @two_points
// MEASURE-SAME:    %arg3: tensor<f32>)
// MEASURE-SAME:    -> ({{.*}}, tensor<2xi32> {jax.result_info = "delayed_exponents"})
// MEASURE-NOT:     stablehlo.is_finite
// MEASURE-NOT:     stablehlo.maximum {{.*}} : tensor<2xi32>
// MEASURE:         return {{.*}} : tensor<4x8xf16>, tensor<f32>, tensor<2xi32>
// FP8-LABEL:     func.func @two_points
// FP8-SAME:        %arg4: tensor<5xi32> {jax.arg_info = "delayed_exponents"}
// FP8-SAME:        -> ({{.*}}, tensor<5xi32> {jax.result_info = "delayed_exponents"})
// FP8-SAME:        scalify.delayed_exponents = 5
// FP8:             stablehlo.slice %arg4 [4:5]
// FP8-NOT:         stablehlo.slice %arg4 [5:6]
// FP8:             stablehlo.convert {{.*}} -> tensor<4x8xf8E4M3FN>
// FP8:             stablehlo.minimum {{.*}} : tensor<2xi32>
// FP8:             [[HELD:%.*]] = stablehlo.maximum {{.*}} : tensor<2xi32>
// FP8:             [[CASTS:%.*]] = stablehlo.concatenate {{.*}} -> tensor<3xi32>
// FP8-NOT:         stablehlo.maximum
// FP8:             [[ALL:%.*]] = stablehlo.concatenate [[HELD]], [[CASTS]], dim = 0
// FP8:             return {{.*}}, [[ALL]] : tensor<4x8xf16>, tensor<f32>, tensor<5xi32>
// NONE-LABEL:    func.func @two_points
// NONE-NOT:        delayed_exponents
// NONE:            return {{.*}} : tensor<4x8xf16>, tensor<f32>
func.func @two_points(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] {scalify.rescale = "amax:nearest"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = stablehlo.dot_general %0, %w, contracting_dims = [1] x [0] {scalify.rescale = "amax:nearest"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// A point inside a loop measures and applies its statistic as before (each iteration's data
// is its own): only top-level points are delayed, so this function's one delayed exponent is
// its result's encoding (a square, stored by its root).

// CHECK-LABEL: func.func @in_a_loop
// CHECK-SAME:    tensor<1xi32> {jax.arg_info = "delayed_exponents"}
// FP8-LABEL:   func.func @in_a_loop
// FP8-SAME:      tensor<1xi32> {jax.arg_info = "delayed_exponents"}
// CHECK:         stablehlo.while
// CHECK:           stablehlo.reduce
// CHECK:         return
func.func @in_a_loop(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xf32>
    cond {
      %p = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %m = stablehlo.multiply %v, %v {scalify.rescale = "amax:nearest"} : tensor<4xf32>
      %n = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %n, %m : tensor<i32>, tensor<4xf32>
    }
  return %r#1 : tensor<4xf32>
}

// -----

// A shard_map body (sdy.manual_computation) is a region of its own: its points measure and
// apply on each device's data, and the function has no delayed exponent.

// CHECK-LABEL: func.func @in_a_manual_region
// CHECK-NOT:     delayed_exponents
// CHECK:         sdy.manual_computation
// CHECK:         return
module @in_a_manual_region attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func @in_a_manual_region(%x: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
    %r = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%local: tensor<2xf32>) {
      %m = stablehlo.multiply %local, %local {scalify.rescale = "amax:nearest"} : tensor<2xf32>
      sdy.return %m : tensor<2xf32>
    } : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// One point of scalify's: it reads the vector of one with a reshape alone. fp8-dots' points
// make the vector longer (1 + 2), and that read becomes a slice of element 0: a reshape of
// the whole vector to a scalar would be invalid.

// CHECK-LABEL: func.func @one_point
// CHECK-SAME:    %arg4: tensor<1xi32> {jax.arg_info = "delayed_exponents"}
// CHECK:         stablehlo.reshape %arg4 : (tensor<1xi32>) -> tensor<i32>
// FP8-LABEL:   func.func @one_point
// FP8-SAME:      %arg4: tensor<3xi32> {jax.arg_info = "delayed_exponents"}
// FP8-NOT:       stablehlo.reshape %arg4
// FP8-DAG:       stablehlo.slice %arg4 [0:1]
// FP8-DAG:       stablehlo.slice %arg4 [1:2]
// FP8-DAG:       stablehlo.slice %arg4 [2:3]
// FP8:           return {{.*}} : tensor<4x8xf16>, tensor<f32>, tensor<3xi32>
func.func @one_point(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] {scalify.rescale = "amax:nearest"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
