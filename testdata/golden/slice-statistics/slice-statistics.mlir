// RUN: scalify-hlo rewrite %s --split-input-file --pipeline slice-statistics | filecheck %s

// slice-statistics: the statistics (full max/sum reductions) of equal slices that tile
// one dimension of a tensor become one reduction of the tensor with that dimension split
// in two, one value per slice: XLA:TPU fuses it into the kernel that makes the tensor,
// where it ran a reduction of slices as a kernel of its own.

// A fused projection's q, k and v (thirds of the last dimension) and their amaxes, with
// the prelude of an FP8 operand's statistic (convert, abs; the reshape to heads drops
// out): one reduce over the dimensions but the split one, its elements in slice order.

// CHECK-LABEL: func.func public @qkv
// CHECK:         [[SPLIT:%.*]] = stablehlo.reshape %arg0 : (tensor<2x4x12xbf16>) -> tensor<2x4x3x4xbf16>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.convert [[SPLIT]] : (tensor<2x4x3x4xbf16>) -> tensor<2x4x3x4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.abs [[F]] : tensor<2x4x3x4xf32>
// CHECK-NEXT:    [[V:%.*]] = stablehlo.reduce([[A]] init: {{%.*}}) applies stablehlo.maximum across dimensions = [0, 1, 3] : (tensor<2x4x3x4xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.slice [[V]] [0:1]
// CHECK-NEXT:    [[QM:%.*]] = stablehlo.reshape [[Q]]
// CHECK-NEXT:    [[K:%.*]] = stablehlo.slice [[V]] [1:2]
// CHECK-NEXT:    [[KM:%.*]] = stablehlo.reshape [[K]]
// CHECK-NEXT:    [[VV:%.*]] = stablehlo.slice [[V]] [2:3]
// CHECK-NEXT:    [[VM:%.*]] = stablehlo.reshape [[VV]]
// CHECK-NOT:     stablehlo.reduce
// CHECK:         return [[QM]], [[KM]], [[VM]]
func.func public @qkv(%arg0: tensor<2x4x12xbf16>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %q = stablehlo.slice %arg0 [0:2, 0:4, 0:4] : (tensor<2x4x12xbf16>) -> tensor<2x4x4xbf16>
  %k = stablehlo.slice %arg0 [0:2, 0:4, 4:8] : (tensor<2x4x12xbf16>) -> tensor<2x4x4xbf16>
  %v = stablehlo.slice %arg0 [0:2, 0:4, 8:12] : (tensor<2x4x12xbf16>) -> tensor<2x4x4xbf16>
  %qh = stablehlo.reshape %q : (tensor<2x4x4xbf16>) -> tensor<2x4x2x2xbf16>
  %qf = stablehlo.convert %qh : (tensor<2x4x2x2xbf16>) -> tensor<2x4x2x2xf32>
  %qa = stablehlo.abs %qf : tensor<2x4x2x2xf32>
  %qm = stablehlo.reduce(%qa init: %zero) applies stablehlo.maximum across dimensions = [0, 1, 2, 3] : (tensor<2x4x2x2xf32>, tensor<f32>) -> tensor<f32>
  %kf = stablehlo.convert %k : (tensor<2x4x4xbf16>) -> tensor<2x4x4xf32>
  %ka = stablehlo.abs %kf : tensor<2x4x4xf32>
  %km = stablehlo.reduce(%ka init: %zero) applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<f32>
  %vf = stablehlo.convert %v : (tensor<2x4x4xbf16>) -> tensor<2x4x4xf32>
  %va = stablehlo.abs %vf : tensor<2x4x4xf32>
  %vm = stablehlo.reduce(%va init: %zero) applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<f32>
  return %qm, %km, %vm : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// Halves of the first dimension, in the other order in the block, and sums of squares
// would not qualify (a binary prelude): only the amaxes are merged, element 1 for the
// half that starts at 2.

// CHECK-LABEL: func.func public @halves
// CHECK:         [[SPLIT:%.*]] = stablehlo.reshape %arg0 : (tensor<4x3xf32>) -> tensor<2x2x3xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.abs [[SPLIT]] : tensor<2x2x3xf32>
// CHECK-NEXT:    [[V:%.*]] = stablehlo.reduce([[A]] init: {{%.*}}) applies stablehlo.maximum across dimensions = [1, 2] : (tensor<2x2x3xf32>, tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[LOW:%.*]] = stablehlo.slice [[V]] [1:2]
// CHECK-NEXT:    [[LM:%.*]] = stablehlo.reshape [[LOW]]
// CHECK-NEXT:    [[HIGH:%.*]] = stablehlo.slice [[V]] [0:1]
// CHECK-NEXT:    [[HM:%.*]] = stablehlo.reshape [[HIGH]]
// CHECK:         stablehlo.multiply
// CHECK:         stablehlo.reduce
// CHECK:         return [[LM]], [[HM]]
func.func public @halves(%arg0: tensor<4x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %low = stablehlo.slice %arg0 [2:4, 0:3] : (tensor<4x3xf32>) -> tensor<2x3xf32>
  %high = stablehlo.slice %arg0 [0:2, 0:3] : (tensor<4x3xf32>) -> tensor<2x3xf32>
  %la = stablehlo.abs %low : tensor<2x3xf32>
  %lm = stablehlo.reduce(%la init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  %ha = stablehlo.abs %high : tensor<2x3xf32>
  %hm = stablehlo.reduce(%ha init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  %sq = stablehlo.multiply %low, %low : tensor<2x3xf32>
  %ss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  return %lm, %hm, %ss : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// Left alone: two of three thirds (one reduction of the tensor would read the third the
// statistics do not), pieces with different preludes (one through abs, one through
// negate), and a strided slice.

// CHECK-LABEL: func.func public @left_alone
// CHECK-COUNT-5: stablehlo.reduce({{.*}}) -> tensor<f32>
// CHECK-NOT:     tensor<3xf32>
// CHECK-NOT:     tensor<2xf32>
// CHECK:         return
func.func public @left_alone(%arg0: tensor<6xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %a = stablehlo.slice %arg0 [0:2] : (tensor<6xf32>) -> tensor<2xf32>
  %b = stablehlo.slice %arg0 [2:4] : (tensor<6xf32>) -> tensor<2xf32>
  %aa = stablehlo.abs %a : tensor<2xf32>
  %am = stablehlo.reduce(%aa init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
  %ba = stablehlo.abs %b : tensor<2xf32>
  %bm = stablehlo.reduce(%ba init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
  %c = stablehlo.slice %arg1 [0:2] : (tensor<4xf32>) -> tensor<2xf32>
  %d = stablehlo.slice %arg1 [2:4] : (tensor<4xf32>) -> tensor<2xf32>
  %ca = stablehlo.abs %c : tensor<2xf32>
  %cm = stablehlo.reduce(%ca init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
  %dn = stablehlo.negate %d : tensor<2xf32>
  %dm = stablehlo.reduce(%dn init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
  %e = stablehlo.slice %arg2 [0:4:2] : (tensor<4xf32>) -> tensor<2xf32>
  %ea = stablehlo.abs %e : tensor<2xf32>
  %em = stablehlo.reduce(%ea init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
  return %am, %bm, %cm, %dm, %em : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// A prelude op that changes the shape (a bitcast_convert from f64 to two f32 halves) is
// not elementwise here: left alone.

// CHECK-LABEL: func.func public @bits
// CHECK-COUNT-2: stablehlo.reduce({{.*}}) -> tensor<f32>
// CHECK-NOT:     tensor<2xf32>
func.func public @bits(%arg0: tensor<4xf64>) -> (tensor<f32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %a = stablehlo.slice %arg0 [0:2] : (tensor<4xf64>) -> tensor<2xf64>
  %b = stablehlo.slice %arg0 [2:4] : (tensor<4xf64>) -> tensor<2xf64>
  %ab = stablehlo.bitcast_convert %a : (tensor<2xf64>) -> tensor<2x2xf32>
  %am = stablehlo.reduce(%ab init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x2xf32>, tensor<f32>) -> tensor<f32>
  %bb = stablehlo.bitcast_convert %b : (tensor<2xf64>) -> tensor<2x2xf32>
  %bm = stablehlo.reduce(%bb init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x2xf32>, tensor<f32>) -> tensor<f32>
  return %am, %bm : tensor<f32>, tensor<f32>
}
