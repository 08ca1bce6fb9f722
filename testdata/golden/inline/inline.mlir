// RUN: scalify-hlo rewrite %s --pipeline inline --split-input-file | filecheck %s
// RUN: scalify-hlo rewrite %s --pipeline inline --split-input-file \
// RUN:   | filecheck %s --check-prefix NOCALL

// `inline` replaces every call to a private function by the callee's body, in
// the callee and in the caller alike, so no call is left anywhere. A call
// prints as `call @f` inside a func.func (`func.` is elided there), or as
// `func.call @f`; `\b` keeps stablehlo.custom_call from matching.
// NOCALL-NOT: {{\bcall @}}

// A single call: the callee's body takes the call's place.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[S:.*]] = stablehlo.sine %[[X]] : tensor<4xf32>
// CHECK-NEXT:    return %[[S]] : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @sin(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @sin(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sine %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A callee that calls another callee: both levels are inlined, in order.

// CHECK-LABEL: func.func public @nested
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[C:.*]] = stablehlo.cosine %[[X]] : tensor<4xf32>
// CHECK-NEXT:    %[[T:.*]] = stablehlo.tanh %[[C]] : tensor<4xf32>
// CHECK-NEXT:    %[[E:.*]] = stablehlo.exponential %[[T]] : tensor<4xf32>
// CHECK-NEXT:    return %[[E]] : tensor<4xf32>
func.func public @nested(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @outer(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.exponential %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @outer(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.cosine %arg0 : tensor<4xf32>
  %1 = call @inner(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @inner(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A callee with two results: each use of %0#i refers to the i-th returned value.

// CHECK-LABEL: func.func public @multiple_results
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xi32>)
// CHECK-NEXT:    %[[N:.*]] = stablehlo.negate %[[X]] : tensor<4xf32>
// CHECK-NEXT:    %[[A:.*]] = stablehlo.abs %[[Y]] : tensor<4xi32>
// CHECK-NEXT:    return %[[A]], %[[N]] : tensor<4xi32>, tensor<4xf32>
func.func public @multiple_results(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %0:2 = call @two(%arg0, %arg1) : (tensor<4xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>)
  return %0#1, %0#0 : tensor<4xi32>, tensor<4xf32>
}
func.func private @two(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %0 = stablehlo.negate %arg0 : tensor<4xf32>
  %1 = stablehlo.abs %arg1 : tensor<4xi32>
  return %0, %1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// A callee called twice is inlined at each call site, with that site's operands.

// CHECK-LABEL: func.func public @two_call_sites
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[SX:.*]] = stablehlo.sqrt %[[X]] : tensor<4xf32>
// CHECK-NEXT:    %[[SY:.*]] = stablehlo.sqrt %[[Y]] : tensor<4xf32>
// CHECK-NEXT:    %[[R:.*]] = stablehlo.add %[[SX]], %[[SY]] : tensor<4xf32>
// CHECK-NEXT:    return %[[R]] : tensor<4xf32>
func.func public @two_call_sites(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @root(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @root(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
func.func private @root(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sqrt %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A module as jax.jit(f).lower(x, y).as_text() prints it: the module's name and
// attributes, argument and result attributes survive inlining. The callee @g is
// called directly and through @"<lambda>", with two results and with one.

// CHECK-LABEL: module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}
// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%[[X:.*]]: tensor<2x2xf32>, %[[Y:.*]]: tensor<2x2xf32>)
// CHECK-SAME:    -> (tensor<2x2xf32> {jax.result_info = "result[0]"}, tensor<2x2xf32> {jax.result_info = "result[1]"})
// CHECK-NEXT:    %[[S0:.*]] = stablehlo.sine %[[X]] : tensor<2x2xf32>
// CHECK:         %[[G0:.*]] = stablehlo.multiply %[[S0]], %{{.*}} : tensor<2x2xf32>
// CHECK:         %[[INC:.*]] = stablehlo.add %[[X]], %{{.*}} : tensor<2x2xf32>
// CHECK-NEXT:    %[[S1:.*]] = stablehlo.sine %[[G0]] : tensor<2x2xf32>
// CHECK:         %[[G1:.*]] = stablehlo.multiply %[[S1]], %{{.*}} : tensor<2x2xf32>
// CHECK:         %[[L:.*]] = stablehlo.add %[[G1]], %{{.*}} : tensor<2x2xf32>
// CHECK-NEXT:    %[[DOT:.*]] = stablehlo.dot_general %[[L]], %[[Y]], contracting_dims = [1] x [0]
// CHECK-NEXT:    return %[[DOT]], %[[INC]] : tensor<2x2xf32>, tensor<2x2xf32>
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x2xf32>, %arg1: tensor<2x2xf32>) -> (tensor<2x2xf32> {jax.result_info = "result[0]"}, tensor<2x2xf32> {jax.result_info = "result[1]"}) {
    %0:2 = call @g(%arg0) : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
    %1 = call @"<lambda>"(%0#0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %2 = stablehlo.dot_general %1, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    return %2, %0#1 : tensor<2x2xf32>, tensor<2x2xf32>
  }
  func.func private @g(%arg0: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
    %0 = stablehlo.sine %arg0 : tensor<2x2xf32>
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %2 = stablehlo.multiply %0, %1 : tensor<2x2xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %4 = stablehlo.add %arg0, %3 : tensor<2x2xf32>
    return %2, %4 : tensor<2x2xf32>, tensor<2x2xf32>
  }
  func.func private @"<lambda>"(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = call @g_0(%arg0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %cst = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %2 = stablehlo.add %0, %1 : tensor<2x2xf32>
    return %2 : tensor<2x2xf32>
  }
  func.func private @g_0(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2x2xf32>
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x2xf32>
    %2 = stablehlo.multiply %0, %1 : tensor<2x2xf32>
    return %2 : tensor<2x2xf32>
  }
}
