// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'materialize-scales{epochs=arguments}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'materialize-scales{epochs=all}' | filecheck %s --check-prefix ALL

// An element of a vector argument (a delayed step's exponents, handed on by the call
// before) belongs to the argument epoch: its slice and reshape join the chains computed
// from the arguments, and the factors built from it are packed with them. Each element was
// the root of an epoch of its own, which materialize-scales{epochs=arguments} left alone:
// on an H100 target a delayed GPT step computed its exponents' factors in scalar kernels
// beside the pack (GPT-2-small: 1116 fusions; 933 with them packed, the FP8 floor 737).

// CHECK-LABEL: func.func public @delayed_exponent
// CHECK:         [[E:%.*]] = stablehlo.slice %arg1 [1:2]
// CHECK-NEXT:    [[S:%.*]] = stablehlo.reshape [[E]] : (tensor<1xi32>) -> tensor<i32>
// CHECK:         [[V:%.*]] = stablehlo.concatenate
// CHECK-NEXT:    [[B:%.*]] = stablehlo.optimization_barrier [[V]] : tensor<2xi32>
// CHECK:         stablehlo.slice [[B]] [0:1]
// CHECK:         stablehlo.multiply %arg0
// CHECK:         return
// ALL-LABEL:   func.func public @delayed_exponent
// ALL:           stablehlo.optimization_barrier
func.func public @delayed_exponent(%arg0: tensor<4xf32>, %arg1: tensor<3xi32>) -> tensor<4xf32> {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %c127 = stablehlo.constant dense<127> : tensor<i32>
  %e1 = stablehlo.slice %arg1 [1:2] : (tensor<3xi32>) -> tensor<1xi32>
  %e = stablehlo.reshape %e1 : (tensor<1xi32>) -> tensor<i32>
  %biased = stablehlo.add %e, %c127 : tensor<i32>
  %bits = stablehlo.shift_left %biased, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %bits : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m = stablehlo.multiply %arg0, %fb : tensor<4xf32>
  return %m : tensor<4xf32>
}

// -----

// A user that reads a scalar from a buffer of its own, which a slice of a pack is not: the
// scale of an FP8 dot's result, which XLA:GPU folds into the cuBLASLt FP8 GEMM (a slice
// there is copied out in a kernel of its own). With the argument epoch alone packed (the
// accelerators' mode) it keeps the scalar, and the return reads the pack; with every epoch
// packed (XLA:CPU's mode, where a copy is a load) the GEMM's scale reads the pack too.

// CHECK-LABEL: func.func public @own_buffers
// CHECK:         [[F:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK:         [[B:%.*]] = stablehlo.optimization_barrier
// CHECK:         [[BF:%.*]] = stablehlo.bitcast_convert [[B]] : (tensor<2xi32>) -> tensor<2xf32>
// CHECK:         [[S:%.*]] = stablehlo.slice [[BF]] [0:1]
// CHECK:         [[P:%.*]] = stablehlo.reshape [[S]] : (tensor<1xf32>) -> tensor<f32>
// CHECK:         [[D:%.*]] = stablehlo.dot_general
// CHECK:         [[FB:%.*]] = stablehlo.broadcast_in_dim [[F]]
// CHECK:         stablehlo.multiply [[D]], [[FB]]
// CHECK:         return {{%.*}}, [[P]]
// ALL-LABEL:   func.func public @own_buffers
// ALL:           [[B:%.*]] = stablehlo.optimization_barrier
// ALL:           [[BF:%.*]] = stablehlo.bitcast_convert [[B]] : (tensor<2xi32>) -> tensor<2xf32>
// ALL:           [[S:%.*]] = stablehlo.slice [[BF]] [0:1]
// ALL:           [[F:%.*]] = stablehlo.reshape [[S]] : (tensor<1xf32>) -> tensor<f32>
// ALL:           stablehlo.broadcast_in_dim [[F]]
// ALL:           return {{%.*}}, [[F]]
func.func public @own_buffers(%arg0: tensor<4x8xf8E4M3FN>, %arg1: tensor<8x4xf8E4M3FN>, %arg2: tensor<i32>) -> (tensor<4x4xf32>, tensor<f32>) {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %x = stablehlo.add %arg2, %arg2 : tensor<i32>
  %bits = stablehlo.shift_left %x, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %bits : (tensor<i32>) -> tensor<f32>
  %d = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<4x8xf8E4M3FN>, tensor<8x4xf8E4M3FN>) -> tensor<4x4xf32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
  %y = stablehlo.multiply %d, %fb : tensor<4x4xf32>
  return %y, %f : tensor<4x4xf32>, tensor<f32>
}
