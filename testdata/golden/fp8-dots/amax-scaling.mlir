// RUN: scalify-hlo rewrite %s --split-input-file --pipeline fp8-dots | filecheck %s

// The default cast (scaling=amax): each operand is brought to the top binade of its FP8
// format by a power of two from its own amax, and the dot's f32 output takes the inverse.
// Why: propagation keeps data near unit scale on average, not within FP8's binades
// (E4M3FN: 2^-9 to 448). The final LayerNorm of a 4-layer scan GPT had data at 2^-11,
// 95% of it below E4M3's smallest subnormal: the forward loss was 3% off at
// initialisation and training diverged after 300 steps. The shift e = 7 - floor(log2(amax))
// (amax * 2^e in [128, 256), below 448) is read from the amax's exponent bits; an amax of
// 0, a subnormal, inf or NaN (exponent -127 or 128) gives e = 0. The shift is applied in the
// data's own type (f16 here, so e is clamped to f16's normal powers, [-14, 15]): a chain of
// its own from the data to the cast, whose layout XLA can choose apart from the data's other
// uses. The inverse 2^-(e_x + e_w)
// and the unit-scaling 2^-k (the multiply by 0.25 below) become one rank-0 factor on the
// GEMM's output, which XLA:GPU folds into the cuBLASLt FP8 GEMM.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[W:%.*]]: tensor<16x4xf16>) -> tensor<8x4xf16>
// CHECK:         [[XW:%.*]] = stablehlo.convert [[X]] : (tensor<8x16xf16>) -> tensor<8x16xf32>
// CHECK:         [[XA:%.*]] = stablehlo.abs [[XW]]
// CHECK:         [[XM:%.*]] = stablehlo.reduce([[XA]] init: {{.*}}) applies stablehlo.maximum across dimensions = [0, 1]
// CHECK:         [[XB:%.*]] = stablehlo.bitcast_convert [[XM]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         [[SEVEN:%.*]] = stablehlo.constant dense<7> : tensor<i32>
// CHECK-NEXT:    [[XS0:%.*]] = stablehlo.subtract [[SEVEN]], [[XE]] : tensor<i32>
// CHECK-NEXT:    [[LOW:%.*]] = stablehlo.constant dense<-14> : tensor<i32>
// CHECK-NEXT:    [[HIGH:%.*]] = stablehlo.constant dense<15> : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp [[LOW]], [[XS0]], [[HIGH]] : tensor<i32>
// CHECK:         [[XS:%.*]] = stablehlo.select {{.*}}, {{.*}}, {{.*}} : tensor<i1>, tensor<i32>
// CHECK:         [[XP:%.*]] = stablehlo.bitcast_convert {{.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[XP16:%.*]] = stablehlo.convert [[XP]] : (tensor<f32>) -> tensor<f16>
// CHECK-NEXT:    [[XF:%.*]] = stablehlo.broadcast_in_dim [[XP16]], dims = [] : (tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[XSH:%.*]] = stablehlo.multiply [[X]], [[XF]] : tensor<8x16xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], [[XSH]], [[HI]]
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK:         [[WS:%.*]] = stablehlo.select {{.*}}, {{.*}}, {{.*}} : tensor<i1>, tensor<i32>
// CHECK:         [[W8:%.*]] = stablehlo.convert {{.*}} : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[SUM:%.*]] = stablehlo.add [[XS]], [[WS]] : tensor<i32>
// CHECK-NEXT:    [[NEG:%.*]] = stablehlo.negate [[SUM]] : tensor<i32>
// CHECK:         [[UNDO:%.*]] = stablehlo.bitcast_convert {{.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.multiply [[UNDO]], [[K]] : tensor<f32>
// CHECK-NEXT:    [[FB:%.*]] = stablehlo.broadcast_in_dim [[F]], dims = [] : (tensor<f32>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.multiply [[D]], [[FB]] : tensor<8x4xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[P]] : (tensor<8x4xf32>) -> tensor<8x4xf16>
// CHECK-NEXT:    return [[Y]] : tensor<8x4xf16>

func.func public @main(%x: tensor<8x16xf16>, %w: tensor<16x4xf16>) -> tensor<8x4xf16> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/dot_general")
  %c = stablehlo.constant dense<2.500000e-01> : tensor<8x4xf16>
  %1 = stablehlo.multiply %0, %c : tensor<8x4xf16>
  return %1 : tensor<8x4xf16>
}
