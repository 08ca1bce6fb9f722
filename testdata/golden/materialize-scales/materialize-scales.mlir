// RUN: scalify-hlo rewrite %s --split-input-file --pipeline materialize-scales | filecheck %s

// materialize-scales (opt-in, for XLA:CPU): scalar ops on scalars move up to just after the
// last non-scalar op they depend on (their epoch's root); the epoch's values that tensor ops
// use go into an i32 vector (f32 as bits) behind an optimization barrier, and the users read
// them back by a static slice, so that XLA:CPU reads one element instead of copying the
// chain into every fusion that uses it.

// A 2^-e factor from an amax: the chain moves up to the reduction, before the negate that
// does not depend on it, and both multiplies read it from the (two-element) vector.

// CHECK-LABEL: func.func public @epoch
// CHECK:         [[A:%.*]] = stablehlo.reduce
// CHECK-NEXT:    [[B:%.*]] = stablehlo.bitcast_convert [[A]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    stablehlo.shift_right_logical [[B]]
// CHECK-NEXT:    stablehlo.subtract
// CHECK-NEXT:    [[S:%.*]] = stablehlo.shift_left
// CHECK-NEXT:    [[F:%.*]] = stablehlo.bitcast_convert [[S]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[I:%.*]] = stablehlo.bitcast_convert [[F]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reshape [[I]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:    [[V:%.*]] = stablehlo.concatenate [[R]], [[R]], dim = 0
// CHECK-NEXT:    [[P:%.*]] = stablehlo.optimization_barrier [[V]] : tensor<2xi32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.slice [[P]] [0:1]
// CHECK-NEXT:    [[X:%.*]] = stablehlo.reshape [[E]] : (tensor<1xi32>) -> tensor<i32>
// CHECK-NEXT:    [[G:%.*]] = stablehlo.bitcast_convert [[X]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    stablehlo.negate
// CHECK-NEXT:    [[FB:%.*]] = stablehlo.broadcast_in_dim [[G]], dims = []
// CHECK-NEXT:    stablehlo.multiply %arg0, [[FB]]
// CHECK-NEXT:    stablehlo.multiply {{%.*}}, [[FB]]
func.func public @epoch(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %abs = stablehlo.abs %arg0 : tensor<4xf32>
  %amax = stablehlo.reduce(%abs init: %cst) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %y = stablehlo.negate %arg1 : tensor<4xf32>
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %c254 = stablehlo.constant dense<254> : tensor<i32>
  %bits = stablehlo.bitcast_convert %amax : (tensor<f32>) -> tensor<i32>
  %e = stablehlo.shift_right_logical %bits, %c23 : tensor<i32>
  %inv = stablehlo.subtract %c254, %e : tensor<i32>
  %s = stablehlo.shift_left %inv, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %s : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m1 = stablehlo.multiply %arg0, %fb : tensor<4xf32>
  %m2 = stablehlo.multiply %y, %fb : tensor<4xf32>
  return %m1, %m2 : tensor<4xf32>, tensor<4xf32>
}


// -----

// A chain of one op is as cheap to copy as a slice of a vector: left as it is.

// CHECK-LABEL: func.func public @lone
// CHECK-NOT:     stablehlo.optimization_barrier
// CHECK:         return
func.func public @lone(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<4xf32> {
  %f = stablehlo.negate %arg1 : tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m = stablehlo.multiply %arg0, %fb : tensor<4xf32>
  return %m : tensor<4xf32>
}


// -----

// Two reductions, two epochs: each chain goes after its own root (the first one before the
// second reduction, which does not need it), and a chain of the second epoch that uses a
// value of the first takes the scalar itself.

// CHECK-LABEL: func.func public @two_epochs
// CHECK:         [[A:%.*]] = stablehlo.reduce
// CHECK-NEXT:    [[RA:%.*]] = stablehlo.reduce_precision [[A]]
// CHECK-NEXT:    [[IA:%.*]] = stablehlo.negate [[RA]]
// CHECK:         stablehlo.optimization_barrier
// CHECK:         [[FA:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    stablehlo.multiply %arg0, %arg0
// CHECK-NEXT:    [[B:%.*]] = stablehlo.reduce
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.reduce_precision [[B]]
// CHECK-NEXT:    stablehlo.multiply [[RB]], [[IA]]
// CHECK:         stablehlo.optimization_barrier
// CHECK:         [[FB:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    stablehlo.broadcast_in_dim [[FA]]
// CHECK-NEXT:    stablehlo.broadcast_in_dim [[FB]]
func.func public @two_epochs(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %abs = stablehlo.abs %arg0 : tensor<4xf32>
  %a = stablehlo.reduce(%abs init: %cst) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %sq = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
  %b = stablehlo.reduce(%sq init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %ra = stablehlo.reduce_precision %a, format = e8m0 : tensor<f32>
  %ia = stablehlo.negate %ra : tensor<f32>
  %rb = stablehlo.reduce_precision %b, format = e8m0 : tensor<f32>
  %ib = stablehlo.multiply %rb, %ia : tensor<f32>
  %fa = stablehlo.broadcast_in_dim %ia, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %fb = stablehlo.broadcast_in_dim %ib, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %x = stablehlo.multiply %arg0, %fa : tensor<4xf32>
  %z = stablehlo.multiply %x, %fb : tensor<4xf32>
  return %z : tensor<4xf32>
}

// -----

// A returned scale goes first in its epoch's pack, whatever its place in the block, and is
// read from one f32 view of the vector: XLA:GPU then writes the returned scales in one
// kernel (a vector's slices fused with the view), not a kernel per slice. Other users read
// an element bitcast after its slice (XLA:TPU runs a view as a kernel of its own).

// CHECK-LABEL: func.func public @returned_first
// CHECK:         [[P:%.*]] = stablehlo.optimization_barrier {{%.*}} : tensor<2xi32>
// CHECK-NEXT:    [[PF:%.*]] = stablehlo.bitcast_convert [[P]] : (tensor<2xi32>) -> tensor<2xf32>
// CHECK-NEXT:    [[E0:%.*]] = stablehlo.slice [[PF]] [0:1]
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reshape [[E0]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT:    [[E1:%.*]] = stablehlo.slice [[P]] [1:2]
// CHECK-NEXT:    [[X:%.*]] = stablehlo.reshape [[E1]] : (tensor<1xi32>) -> tensor<i32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.bitcast_convert [[X]] : (tensor<i32>) -> tensor<f32>
// CHECK:         [[FB:%.*]] = stablehlo.broadcast_in_dim [[F]], dims = []
// CHECK:         return {{%.*}}, [[R]]
func.func public @returned_first(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> (tensor<4xf32>, tensor<f32>) {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %a = stablehlo.add %arg1, %arg1 : tensor<i32>
  %abits = stablehlo.shift_left %a, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %abits : (tensor<i32>) -> tensor<f32>
  %b = stablehlo.multiply %arg1, %arg1 : tensor<i32>
  %bbits = stablehlo.shift_left %b, %c23 : tensor<i32>
  %r = stablehlo.bitcast_convert %bbits : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m = stablehlo.multiply %arg0, %fb : tensor<4xf32>
  return %m, %r : tensor<4xf32>, tensor<f32>
}

// -----

// An integer the step returns (Adam's count, say) shares the view of a vector that holds a
// returned f32, bitcast back to its bits: XLA:GPU writes it in the same kernel. A vector
// with no returned f32 gets no view for it (XLA:TPU would run the view as a kernel).

// CHECK-LABEL: func.func public @returned_integer
// CHECK:         [[P:%.*]] = stablehlo.optimization_barrier {{%.*}} : tensor<2xi32>
// CHECK-NEXT:    [[PF:%.*]] = stablehlo.bitcast_convert [[P]] : (tensor<2xi32>) -> tensor<2xf32>
// CHECK-NEXT:    [[E0:%.*]] = stablehlo.slice [[PF]] [0:1]
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reshape [[E0]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT:    [[E1:%.*]] = stablehlo.slice [[PF]] [1:2]
// CHECK-NEXT:    [[X:%.*]] = stablehlo.reshape [[E1]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.bitcast_convert [[X]] : (tensor<f32>) -> tensor<i32>
// CHECK:         return [[R]], [[K]]
func.func public @returned_integer(%arg0: tensor<i32>) -> (tensor<f32>, tensor<i32>) {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %a = stablehlo.add %arg0, %arg0 : tensor<i32>
  %bits = stablehlo.shift_left %a, %c23 : tensor<i32>
  %r = stablehlo.bitcast_convert %bits : (tensor<i32>) -> tensor<f32>
  %k1 = stablehlo.multiply %arg0, %arg0 : tensor<i32>
  %k = stablehlo.add %k1, %c23 : tensor<i32>
  return %r, %k : tensor<f32>, tensor<i32>
}

// -----

// CHECK-LABEL: func.func public @returned_integer_alone
// CHECK:         [[P:%.*]] = stablehlo.optimization_barrier {{%.*}} : tensor<2xi32>
// CHECK-NEXT:    stablehlo.slice [[P]] [0:1]
// CHECK-NOT:     stablehlo.bitcast_convert
// CHECK:         return
func.func public @returned_integer_alone(%arg0: tensor<i32>) -> tensor<i32> {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %k1 = stablehlo.multiply %arg0, %arg0 : tensor<i32>
  %k = stablehlo.add %k1, %c23 : tensor<i32>
  return %k : tensor<i32>
}
