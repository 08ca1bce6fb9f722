// RUN: scalify-hlo rewrite %s --split-input-file --pipeline hoist-loop-scales | filecheck %s

// hoist-loop-scales (run at the end of simplify): scalar arithmetic of a while body on values
// the loop passes through unchanged is computed once before the loop and handed in packed,
// at most 8 scalars per f32 vector (i32 as f32 bits), behind an optimization barrier; the
// body takes each scalar back with a static slice and returns the vector through a barrier,
// so that XLA neither folds the slices away nor hoists each scalar as a kernel of its own.

// A scale factor 2^e built from a loop-invariant exponent: the whole chain leaves the loop.

// CHECK-LABEL: func.func public @invariant
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[E:%.*]]: tensor<i32>)
// CHECK:         [[B:%.*]] = stablehlo.add [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.shift_left [[B]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.bitcast_convert [[S]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[V:%.*]] = stablehlo.reshape [[F]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.optimization_barrier [[V]] : tensor<1xf32>
// CHECK-NEXT:    {{%.*}}:4 = stablehlo.while({{.*}}, [[A:%.*]] = [[P]]) : tensor<4xf32>, tensor<i32>, tensor<i32>, tensor<1xf32>
// CHECK:         } do {
// CHECK-NEXT:      [[ONE:%.*]] = stablehlo.slice [[A]] [0:1] : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:      [[G:%.*]] = stablehlo.reshape [[ONE]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NOT:       stablehlo.shift_left
// CHECK-NEXT:      {{%.*}} = stablehlo.broadcast_in_dim [[G]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK:           [[R:%.*]] = stablehlo.optimization_barrier [[A]] : tensor<1xf32>
// CHECK-NEXT:      stablehlo.return {{.*}}, [[R]] : tensor<4xf32>, tensor<i32>, tensor<i32>, tensor<1xf32>
func.func public @invariant(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:3 = stablehlo.while(%x = %arg0, %e = %arg1, %i = %c0) : tensor<4xf32>, tensor<i32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c23 = stablehlo.constant dense<23> : tensor<i32>
    %c127 = stablehlo.constant dense<127> : tensor<i32>
    %b = stablehlo.add %e, %c127 : tensor<i32>
    %s = stablehlo.shift_left %b, %c23 : tensor<i32>
    %f = stablehlo.bitcast_convert %s : (tensor<i32>) -> tensor<f32>
    %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y = stablehlo.multiply %x, %fb : tensor<4xf32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %y, %e, %j : tensor<4xf32>, tensor<i32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// Arithmetic on the counter or on a value the loop changes stays in the body.

// CHECK-LABEL: func.func public @variant
// CHECK-NOT:     optimization_barrier
// CHECK:         } do {
// CHECK-NEXT:      {{%.*}} = stablehlo.add
// CHECK-NEXT:      {{%.*}} = stablehlo.convert
// CHECK-NOT:     optimization_barrier
func.func public @variant(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:3 = stablehlo.while(%x = %arg0, %e = %arg1, %i = %c0) : tensor<4xf32>, tensor<i32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %k = stablehlo.add %e, %i : tensor<i32>
    %f = stablehlo.convert %k : (tensor<i32>) -> tensor<f32>
    %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y = stablehlo.multiply %x, %fb : tensor<4xf32>
    %e1 = stablehlo.add %e, %c1 : tensor<i32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %y, %e1, %j : tensor<4xf32>, tensor<i32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// Two loop arguments start from the same value: their equal products are hoisted once and
// travel as one element (a concatenate that takes a value twice is a kernel per operand).

// CHECK-LABEL: func.func public @shared
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[S:%.*]]: tensor<f32>)
// CHECK:         [[M:%.*]] = stablehlo.multiply [[S]], [[S]] : tensor<f32>
// CHECK-NOT:     stablehlo.multiply
// CHECK-NEXT:    [[V:%.*]] = stablehlo.reshape [[M]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    {{%.*}} = stablehlo.optimization_barrier [[V]] : tensor<1xf32>
// CHECK:         } do {
// CHECK-NEXT:      {{%.*}} = stablehlo.slice {{%.*}} [0:1] : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:      [[G:%.*]] = stablehlo.reshape
// CHECK-NEXT:      [[K:%.*]] = stablehlo.convert
// CHECK-NEXT:      {{%.*}} = stablehlo.add [[G]], [[K]] : tensor<f32>
// CHECK-NEXT:      {{%.*}} = stablehlo.add [[G]], [[K]] : tensor<f32>
func.func public @shared(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:4 = stablehlo.while(%x = %arg0, %s = %arg1, %t = %arg1, %i = %c0) : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %s2 = stablehlo.multiply %s, %s : tensor<f32>
    %t2 = stablehlo.multiply %t, %t : tensor<f32>
    %k = stablehlo.convert %i : (tensor<i32>) -> tensor<f32>
    %a = stablehlo.add %s2, %k : tensor<f32>
    %b = stablehlo.add %t2, %k : tensor<f32>
    %ab = stablehlo.add %a, %b : tensor<f32>
    %fb = stablehlo.broadcast_in_dim %ab, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y = stablehlo.multiply %x, %fb : tensor<4xf32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %y, %s, %t, %j : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// An i32 exponent and an f32 factor: each type in vectors of its own (an
// integer carried as f32 bits would be an f32 subnormal, which XLA:CPU may
// flush to zero).

// CHECK-LABEL: func.func public @mixed
// CHECK:         [[E:%.*]] = stablehlo.add {{%.*}}, {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.multiply {{%.*}}, {{%.*}} : tensor<f32>
// CHECK-NEXT:    [[E1:%.*]] = stablehlo.reshape [[E]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:    [[F1:%.*]] = stablehlo.reshape [[F]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    {{%.*}}:2 = stablehlo.optimization_barrier [[E1]], [[F1]] : tensor<1xi32>, tensor<1xf32>
// CHECK:         } do {
// CHECK-NEXT:      {{%.*}} = stablehlo.slice [[A:%.*]] [0:1] : (tensor<1xi32>) -> tensor<1xi32>
// CHECK-NEXT:      [[EI:%.*]] = stablehlo.reshape {{%.*}} : (tensor<1xi32>) -> tensor<i32>
// CHECK-NEXT:      {{%.*}} = stablehlo.slice {{%.*}} [0:1] : (tensor<1xf32>) -> tensor<1xf32>
// CHECK-NEXT:      {{%.*}} = stablehlo.reshape
// CHECK-NEXT:      {{%.*}} = stablehlo.add {{%.*}}, [[EI]] : tensor<i32>
func.func public @mixed(%arg0: tensor<4xf32>, %arg1: tensor<i32>, %arg2: tensor<f32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:4 = stablehlo.while(%x = %arg0, %e = %arg1, %s = %arg2, %i = %c0) : tensor<4xf32>, tensor<i32>, tensor<f32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %e2 = stablehlo.add %e, %c1 : tensor<i32>
    %s2 = stablehlo.multiply %s, %s : tensor<f32>
    %k = stablehlo.add %i, %e2 : tensor<i32>
    %fb = stablehlo.broadcast_in_dim %s2, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y = stablehlo.multiply %x, %fb : tensor<4xf32>
    stablehlo.return %y, %e, %s, %k : tensor<4xf32>, tensor<i32>, tensor<f32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// Nine hoisted scalars: a vector of 8 and one of 1 (XLA:CPU fuses a concatenate of up to about
// 8 scalars into one kernel).

// CHECK-LABEL: func.func public @nine
// CHECK:         {{%.*}} = stablehlo.concatenate {{.*}} -> tensor<8xf32>
// CHECK-NEXT:    [[LAST:%.*]] = stablehlo.reshape {{%.*}} : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    {{%.*}}:2 = stablehlo.optimization_barrier {{%.*}}, [[LAST]] : tensor<8xf32>, tensor<1xf32>
// CHECK-NEXT:    {{%.*}}:5 = stablehlo.while({{.*}}) : tensor<4xf32>, tensor<f32>, tensor<i32>, tensor<8xf32>, tensor<1xf32>
// CHECK-COUNT-8:   stablehlo.slice {{%.*}} [{{[0-7]}}:{{[1-8]}}] : (tensor<8xf32>) -> tensor<1xf32>
// CHECK:           stablehlo.slice {{%.*}} [0:1] : (tensor<1xf32>) -> tensor<1xf32>
func.func public @nine(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<4xf32> {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %i1 = stablehlo.constant dense<1> : tensor<i32>
  %i3 = stablehlo.constant dense<3> : tensor<i32>
  %0:3 = stablehlo.while(%x = %arg0, %s = %arg1, %i = %i0) : tensor<4xf32>, tensor<f32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %i3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c0 = stablehlo.constant dense<2.0> : tensor<f32>
    %s0 = stablehlo.multiply %s, %c0 : tensor<f32>
    %b0 = stablehlo.broadcast_in_dim %s0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y0 = stablehlo.multiply %x, %b0 : tensor<4xf32>
    %c1 = stablehlo.constant dense<3.0> : tensor<f32>
    %s1 = stablehlo.multiply %s, %c1 : tensor<f32>
    %b1 = stablehlo.broadcast_in_dim %s1, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y1 = stablehlo.multiply %y0, %b1 : tensor<4xf32>
    %c2 = stablehlo.constant dense<4.0> : tensor<f32>
    %s2 = stablehlo.multiply %s, %c2 : tensor<f32>
    %b2 = stablehlo.broadcast_in_dim %s2, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y2 = stablehlo.multiply %y1, %b2 : tensor<4xf32>
    %c3 = stablehlo.constant dense<5.0> : tensor<f32>
    %s3 = stablehlo.multiply %s, %c3 : tensor<f32>
    %b3 = stablehlo.broadcast_in_dim %s3, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y3 = stablehlo.multiply %y2, %b3 : tensor<4xf32>
    %c4 = stablehlo.constant dense<6.0> : tensor<f32>
    %s4 = stablehlo.multiply %s, %c4 : tensor<f32>
    %b4 = stablehlo.broadcast_in_dim %s4, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y4 = stablehlo.multiply %y3, %b4 : tensor<4xf32>
    %c5 = stablehlo.constant dense<7.0> : tensor<f32>
    %s5 = stablehlo.multiply %s, %c5 : tensor<f32>
    %b5 = stablehlo.broadcast_in_dim %s5, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y5 = stablehlo.multiply %y4, %b5 : tensor<4xf32>
    %c6 = stablehlo.constant dense<8.0> : tensor<f32>
    %s6 = stablehlo.multiply %s, %c6 : tensor<f32>
    %b6 = stablehlo.broadcast_in_dim %s6, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y6 = stablehlo.multiply %y5, %b6 : tensor<4xf32>
    %c7 = stablehlo.constant dense<9.0> : tensor<f32>
    %s7 = stablehlo.multiply %s, %c7 : tensor<f32>
    %b7 = stablehlo.broadcast_in_dim %s7, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y7 = stablehlo.multiply %y6, %b7 : tensor<4xf32>
    %c8 = stablehlo.constant dense<10.0> : tensor<f32>
    %s8 = stablehlo.multiply %s, %c8 : tensor<f32>
    %b8 = stablehlo.broadcast_in_dim %s8, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y8 = stablehlo.multiply %y7, %b8 : tensor<4xf32>
    %j = stablehlo.add %i, %i1 : tensor<i32>
    stablehlo.return %y8, %s, %j : tensor<4xf32>, tensor<f32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// A small unsigned integer made in the body from a constant (a divisor, as in
// jnp.searchsorted's binary search) leaves the loop as a ui32, in a vector of
// its own beside the f32 one. Carried as f32 bits, a small integer is an f32
// subnormal, which XLA may flush to zero (it did in that binary search: a
// division by zero; tests/test_loop_scales.py runs it).

// CHECK-LABEL: func.func public @small_int
// CHECK:         [[U:%.*]] = stablehlo.convert {{%.*}} : (tensor<i32>) -> tensor<ui32>
// CHECK:         [[F:%.*]] = stablehlo.multiply {{%.*}}, {{%.*}} : tensor<f32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.reshape [[U]] : (tensor<ui32>) -> tensor<1xui32>
// CHECK-NEXT:    [[F1:%.*]] = stablehlo.reshape [[F]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    {{%.*}}:2 = stablehlo.optimization_barrier [[U1]], [[F1]] : tensor<1xui32>, tensor<1xf32>
// CHECK:         } do {
// CHECK-NEXT:      {{%.*}} = stablehlo.slice {{%.*}} [0:1] : (tensor<1xui32>) -> tensor<1xui32>
// CHECK-NEXT:      {{%.*}} = stablehlo.reshape {{%.*}} : (tensor<1xui32>) -> tensor<ui32>
func.func public @small_int(%arg0: tensor<4xui32>, %arg1: tensor<4xf32>, %arg2: tensor<f32>) -> (tensor<4xui32>, tensor<4xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:4 = stablehlo.while(%x = %arg0, %y = %arg1, %s = %arg2, %i = %c0) : tensor<4xui32>, tensor<4xf32>, tensor<f32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %two = stablehlo.constant dense<2> : tensor<i32>
    %u = stablehlo.convert %two : (tensor<i32>) -> tensor<ui32>
    %ub = stablehlo.broadcast_in_dim %u, dims = [] : (tensor<ui32>) -> tensor<4xui32>
    %x2 = stablehlo.divide %x, %ub : tensor<4xui32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %s2 = stablehlo.multiply %half, %half : tensor<f32>
    %sb = stablehlo.broadcast_in_dim %s2, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y2 = stablehlo.multiply %y, %sb : tensor<4xf32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %x2, %y2, %s, %j : tensor<4xui32>, tensor<4xf32>, tensor<f32>, tensor<i32>
  }
  return %0#0, %0#1 : tensor<4xui32>, tensor<4xf32>
}
