// RUN: scalify-hlo rewrite %s --split-input-file --pipeline dot-transposes | filecheck %s

// A weight gradient as the rewrite leaves it: the GEMM's f32 output, the unit-scaling
// factor, an f16 round trip, the saturating clamp of a narrowing convert, then JAX's
// transpose to the weight's layout; beside it a statistic (abs, then a max over every
// dimension). The chain moves onto transpose(dot), which XLA folds into the GEMM: the
// GEMM writes the weight's layout and the optimizer's update runs in it. The statistic
// reads the transposed values (a full reduction does not see the order).

// CHECK-LABEL: func.func @weight_gradient
// CHECK-SAME:    ([[DY:%.*]]: tensor<8x6xf8E5M2>, [[X:%.*]]: tensor<8x4xf8E4M3FN>, [[S:%.*]]: tensor<f32>)
// CHECK:         [[D:%.*]] = stablehlo.dot_general [[DY]], [[X]], contracting_dims = [0] x [0] {{.*}} -> tensor<6x4xf32>
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[D]], dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
// CHECK-NEXT:    [[B:%.*]] = stablehlo.broadcast_in_dim [[S]], dims = [] : (tensor<f32>) -> tensor<4x6xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[T]], [[B]] : tensor<4x6xf32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.convert [[M]] : (tensor<4x6xf32>) -> tensor<4x6xf16>
// CHECK-NEXT:    [[W:%.*]] = stablehlo.convert [[H]] : (tensor<4x6xf16>) -> tensor<4x6xf32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.clamp {{%.*}}, [[W]], {{%.*}} : (tensor<f32>, tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.is_finite [[W]] : (tensor<4x6xf32>) -> tensor<4x6xi1>
// CHECK-NEXT:    [[SEL:%.*]] = stablehlo.select [[F]], [[C]], [[W]] : tensor<4x6xi1>, tensor<4x6xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.abs [[W]] : tensor<4x6xf32>
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant
// CHECK-NEXT:    [[MAX:%.*]] = stablehlo.reduce([[A]] init: [[Z]]) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x6xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    return [[SEL]], [[MAX]] : tensor<4x6xf32>, tensor<f32>
func.func @weight_gradient(%dy: tensor<8x6xf8E5M2>, %x: tensor<8x4xf8E4M3FN>, %s: tensor<f32>) -> (tensor<4x6xf32>, tensor<f32>) {
  %lo = stablehlo.constant dense<-6.550400e+04> : tensor<f32>
  %hi = stablehlo.constant dense<6.550400e+04> : tensor<f32>
  %d = stablehlo.dot_general %dy, %x, contracting_dims = [0] x [0] : (tensor<8x6xf8E5M2>, tensor<8x4xf8E4M3FN>) -> tensor<6x4xf32>
  %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<6x4xf32>
  %m = stablehlo.multiply %d, %b : tensor<6x4xf32>
  %h = stablehlo.convert %m : (tensor<6x4xf32>) -> tensor<6x4xf16>
  %w = stablehlo.convert %h : (tensor<6x4xf16>) -> tensor<6x4xf32>
  %c = stablehlo.clamp %lo, %w, %hi : (tensor<f32>, tensor<6x4xf32>, tensor<f32>) -> tensor<6x4xf32>
  %f = stablehlo.is_finite %w : (tensor<6x4xf32>) -> tensor<6x4xi1>
  %sel = stablehlo.select %f, %c, %w : tensor<6x4xi1>, tensor<6x4xf32>
  %t = stablehlo.transpose %sel, dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %a = stablehlo.abs %w : tensor<6x4xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %max = stablehlo.reduce(%a init: %z) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<6x4xf32>, tensor<f32>) -> tensor<f32>
  return %t, %max : tensor<4x6xf32>, tensor<f32>
}

// -----

// Attention's heads: a batched dot, a splat factor, then a transpose of the head axes;
// two like transposes of the same value both read the moved chain.

// CHECK-LABEL: func.func @heads
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[D]], dims = [0, 2, 1, 3] : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<1.250000e-01> : tensor<2x5x3x4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[T]], [[K]] : tensor<2x5x3x4xf32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.convert [[M]] : (tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf16>
// CHECK-NEXT:    return [[H]], [[H]]
func.func @heads(%p: tensor<2x3x5x7xf16>, %v: tensor<2x3x7x4xf16>) -> (tensor<2x5x3x4xf16>, tensor<2x5x3x4xf16>) {
  %d = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x3x5x7xf16>, tensor<2x3x7x4xf16>) -> tensor<2x3x5x4xf32>
  %k = stablehlo.constant dense<1.250000e-01> : tensor<2x3x5x4xf32>
  %m = stablehlo.multiply %d, %k : tensor<2x3x5x4xf32>
  %h = stablehlo.convert %m : (tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf16>
  %t1 = stablehlo.transpose %h, dims = [0, 2, 1, 3] : (tensor<2x3x5x4xf16>) -> tensor<2x5x3x4xf16>
  %t2 = stablehlo.transpose %h, dims = [0, 2, 1, 3] : (tensor<2x3x5x4xf16>) -> tensor<2x5x3x4xf16>
  return %t1, %t2 : tensor<2x5x3x4xf16>, tensor<2x5x3x4xf16>
}

// -----

// Left alone: a value of the chain is also used in the dot's layout (returned), so moving
// the transpose would take a second one.

// CHECK-LABEL: func.func @other_use
// CHECK:         [[D:%.*]] = stablehlo.dot_general {{.*}} -> tensor<6x4xf32>
// CHECK:         [[M:%.*]] = stablehlo.multiply [[D]], {{%.*}} : tensor<6x4xf32>
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[M]], dims = [1, 0]
// CHECK-NEXT:    return [[T]], [[M]]
func.func @other_use(%a: tensor<8x6xf32>, %b: tensor<8x4xf32>, %s: tensor<f32>) -> (tensor<4x6xf32>, tensor<6x4xf32>) {
  %d = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %f = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<6x4xf32>
  %m = stablehlo.multiply %d, %f : tensor<6x4xf32>
  %t = stablehlo.transpose %m, dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
  return %t, %m : tensor<4x6xf32>, tensor<6x4xf32>
}

// -----

// Left alone: a tensor operand that is not a broadcast scalar (a bias in the dot's
// layout), and a transpose whose operand is not made from a dot.

// CHECK-LABEL: func.func @tensor_operand
// CHECK:         [[D:%.*]] = stablehlo.dot_general {{.*}} -> tensor<6x4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[D]], %arg2 : tensor<6x4xf32>
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[A]], dims = [1, 0]
// CHECK-NEXT:    [[N:%.*]] = stablehlo.negate %arg2
// CHECK-NEXT:    [[U:%.*]] = stablehlo.transpose [[N]], dims = [1, 0]
// CHECK-NEXT:    return [[T]], [[U]]
func.func @tensor_operand(%a: tensor<8x6xf32>, %b: tensor<8x4xf32>, %bias: tensor<6x4xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %d = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %s = stablehlo.add %d, %bias : tensor<6x4xf32>
  %t = stablehlo.transpose %s, dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %n = stablehlo.negate %bias : tensor<6x4xf32>
  %u = stablehlo.transpose %n, dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
  return %t, %u : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// Left alone: a value of the chain is used by an elementwise op inside a branch (the moved
// DAG is emitted in the dot's block only), even where what it feeds there is a statistic.

// CHECK-LABEL: func.func @branch_use
// CHECK:         [[D:%.*]] = stablehlo.dot_general {{.*}} -> tensor<6x4xf32>
// CHECK:         [[M:%.*]] = stablehlo.multiply [[D]], {{%.*}} : tensor<6x4xf32>
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[M]], dims = [1, 0]
// CHECK:         stablehlo.negate [[M]] : tensor<6x4xf32>
func.func @branch_use(%a: tensor<8x6xf32>, %b: tensor<8x4xf32>, %s: tensor<f32>, %p: tensor<i1>) -> (tensor<4x6xf32>, tensor<f32>) {
  %d = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<8x6xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %f = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<6x4xf32>
  %m = stablehlo.multiply %d, %f : tensor<6x4xf32>
  %t = stablehlo.transpose %m, dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %r = "stablehlo.if"(%p) ({
    %n = stablehlo.negate %m : tensor<6x4xf32>
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %x = stablehlo.reduce(%n init: %z) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<6x4xf32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %x : tensor<f32>
  }, {
    stablehlo.return %s : tensor<f32>
  }) : (tensor<i1>) -> tensor<f32>
  return %t, %r : tensor<4x6xf32>, tensor<f32>
}
