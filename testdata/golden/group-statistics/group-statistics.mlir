// RUN: scalify-hlo rewrite %s --split-input-file --pipeline group-statistics | filecheck %s

// group-statistics: full reductions of one block (a statistic: the amax or sum of squares
// a run-time scale comes from) that can be taken at the same point become one row
// reduction: each tensor flattened and padded into rows, the rows concatenated, one reduce
// per row, and where a tensor takes several rows, one more reduce of the row results
// masked per tensor, to a vector with one value per tensor. XLA:GPU runs the
// group as two kernels, however many tensors it holds (one where each fits in a row; each
// reduction on its own is one or two).

// Two amaxes, both needed by the last op: taken together, before it. The tensors are
// smaller than a row (2048), so the rows are as wide as the largest one (a power of two):
// 8 elements, the 6-element one padded with the init value. One row each: the row results
// are the tensors' values.

// CHECK-LABEL: func.func public @together
// CHECK:         [[A:%.*]] = stablehlo.abs %arg0
// CHECK:         [[B:%.*]] = stablehlo.abs %arg1
// CHECK:         [[RA:%.*]] = stablehlo.reshape [[A]] : (tensor<2x4xf32>) -> tensor<1x8xf32>
// CHECK:         [[PB:%.*]] = stablehlo.pad [[B]], {{%.*}}, low = [0], high = [2], interior = [0]
// CHECK:         [[RB:%.*]] = stablehlo.reshape [[PB]] : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK:         [[ROWS:%.*]] = stablehlo.concatenate [[RA]], [[RB]], dim = 0
// CHECK:         [[PER_ROW:%.*]] = stablehlo.reduce([[ROWS]] init: {{%.*}}) applies stablehlo.maximum across dimensions = [1] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2xf32>
// CHECK-NOT:     stablehlo.iota
// CHECK:         stablehlo.slice [[PER_ROW]] [0:1]
// CHECK:         stablehlo.slice [[PER_ROW]] [1:2]
// CHECK:         [[P:%.*]] = stablehlo.multiply
// CHECK-NEXT:    return [[P]]
func.func public @together(%arg0: tensor<2x4xf32>, %arg1: tensor<6xf32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %a = stablehlo.abs %arg0 : tensor<2x4xf32>
  %amax_a = stablehlo.reduce(%a init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
  %b = stablehlo.abs %arg1 : tensor<6xf32>
  %amax_b = stablehlo.reduce(%b init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<6xf32>, tensor<f32>) -> tensor<f32>
  %p = stablehlo.multiply %amax_a, %amax_b : tensor<f32>
  return %p : tensor<f32>
}

// -----

// A tensor larger than a row takes several rows (3000 elements: two rows of 2048, the
// second padded). The three row results are spread to one row per tensor, each keeping
// its own (rows 0-1 and row 2: from its first row, by an iota, to the next tensor's) and
// the init value elsewhere, and reduced again.

// CHECK-LABEL: func.func public @rows
// CHECK:         stablehlo.pad {{%.*}}, {{%.*}}, low = [0], high = [1096], interior = [0] : (tensor<3000xf32>, tensor<f32>) -> tensor<4096xf32>
// CHECK:         stablehlo.reshape {{%.*}} : (tensor<4096xf32>) -> tensor<2x2048xf32>
// CHECK:         [[ROWS:%.*]] = stablehlo.concatenate {{.*}} -> tensor<3x2048xf32>
// CHECK:         [[PER_ROW:%.*]] = stablehlo.reduce([[ROWS]] init: [[INIT:%.*]]) applies stablehlo.maximum across dimensions = [1] : (tensor<3x2048xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK:         [[ROW:%.*]] = stablehlo.iota dim = 1 : tensor<2x3xi32>
// CHECK:         stablehlo.constant dense<[0, 2]> : tensor<2xi32>
// CHECK:         [[FROM:%.*]] = stablehlo.compare GE, [[ROW]]
// CHECK:         stablehlo.constant dense<[2, 3]> : tensor<2xi32>
// CHECK:         [[TO:%.*]] = stablehlo.compare LT, [[ROW]]
// CHECK:         [[OWN:%.*]] = stablehlo.and [[FROM]], [[TO]] : tensor<2x3xi1>
// CHECK:         [[SPREAD:%.*]] = stablehlo.broadcast_in_dim [[PER_ROW]], dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK:         [[FILL:%.*]] = stablehlo.broadcast_in_dim [[INIT]], dims = []
// CHECK:         [[KEPT:%.*]] = stablehlo.select [[OWN]], [[SPREAD]], [[FILL]]
// CHECK:         [[VEC:%.*]] = stablehlo.reduce([[KEPT]] init: [[INIT]]) applies stablehlo.maximum across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
// CHECK:         stablehlo.slice [[VEC]] [0:1]
// CHECK:         stablehlo.slice [[VEC]] [1:2]
func.func public @rows(%arg0: tensor<3000xf32>, %arg1: tensor<5xf32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %a = stablehlo.abs %arg0 : tensor<3000xf32>
  %amax_a = stablehlo.reduce(%a init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<3000xf32>, tensor<f32>) -> tensor<f32>
  %b = stablehlo.abs %arg1 : tensor<5xf32>
  %amax_b = stablehlo.reduce(%b init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<5xf32>, tensor<f32>) -> tensor<f32>
  %p = stablehlo.add %amax_a, %amax_b : tensor<f32>
  return %p : tensor<f32>
}

// -----

// A statistic whose input needs another's result (data rescaled by the first amax) cannot
// share its group: the first is taken alone (a single reduction stays as it is), the
// second after the factor it reads, and the scalar ops computed from the first (the factor
// here) follow it.

// CHECK-LABEL: func.func public @dependent
// CHECK:         [[A1:%.*]] = stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [0]
// CHECK:         [[F:%.*]] = stablehlo.divide {{%.*}}, [[A1]]
// CHECK:         [[FB:%.*]] = stablehlo.broadcast_in_dim [[F]]
// CHECK:         [[X:%.*]] = stablehlo.multiply %arg0, [[FB]]
// CHECK:         stablehlo.abs [[X]]
// CHECK:         stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [0]
// CHECK-NOT:     stablehlo.concatenate
// CHECK:         return
func.func public @dependent(%arg0: tensor<4xf32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %one = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %a = stablehlo.abs %arg0 : tensor<4xf32>
  %amax = stablehlo.reduce(%a init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %f = stablehlo.divide %one, %amax : tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %x = stablehlo.multiply %arg0, %fb : tensor<4xf32>
  %ax = stablehlo.abs %x : tensor<4xf32>
  %amax_x = stablehlo.reduce(%ax init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %amax_x : tensor<f32>
}

// -----

// Statistics of different kinds (a max and a sum of squares) share no rows: two groups at
// the same point.

// CHECK-LABEL: func.func public @kinds
// CHECK-COUNT-2: stablehlo.concatenate
// CHECK:         return
func.func public @kinds(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %a = stablehlo.abs %arg0 : tensor<4xf32>
  %amax_a = stablehlo.reduce(%a init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %b = stablehlo.abs %arg1 : tensor<4xf32>
  %amax_b = stablehlo.reduce(%b init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %sa = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
  %ssa = stablehlo.reduce(%sa init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %sb = stablehlo.multiply %arg1, %arg1 : tensor<4xf32>
  %ssb = stablehlo.reduce(%sb init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %m = stablehlo.multiply %amax_a, %amax_b : tensor<f32>
  %s = stablehlo.multiply %ssa, %ssb : tensor<f32>
  %p = stablehlo.add %m, %s : tensor<f32>
  return %p : tensor<f32>
}

// -----

// A partial reduction (over some dimensions) is no statistic: left alone.

// CHECK-LABEL: func.func public @partial
// CHECK-NOT:     stablehlo.concatenate
// CHECK:         return
func.func public @partial(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %r0 = stablehlo.reduce(%arg0 init: %zero) applies stablehlo.maximum across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
  %r1 = stablehlo.reduce(%arg1 init: %zero) applies stablehlo.maximum across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
  return %r0, %r1 : tensor<2xf32>, tensor<2xf32>
}
