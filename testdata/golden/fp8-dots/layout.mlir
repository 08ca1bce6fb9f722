// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' --stats 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix STATS

// Dimension layouts. cuBLASLt's FP8 GEMM takes, per operand, batch dimensions
// then one contracting and one non-contracting dimension. After the cast, each
// f8 operand is brought to (batch..., group, group):
// * when the batch dimensions lead (in order) and the contracting and the free
//   dimensions each form one contiguous run, a reshape merges each run (no
//   reshape at all when the runs are single dimensions);
// * otherwise a transpose puts batch first, free next, contracting last
//   (contracting-minor, "TN"), then a reshape merges the runs.
// The f32 product is reshaped back to the original result shape (batch, lhs
// free..., rhs free...) and converted to the data dtype.

// STATS-NOT:  warning
// STATS:      fp8-dots.dots: 7
// STATS-NEXT: fp8-dots.f8E4M3FNxf8E4M3FN: 7
// STATS-NEXT: fp8-dots.fp8: 7

// Leading batch dimension, two lhs free dimensions (8x2): reshape only, to 4x16x16;
// the rhs (batch, contracting, free) is already grouped.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<4x8x2x16xf16>, [[B:%.*]]: tensor<4x16x3xf16>) -> tensor<4x8x2x3xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[AC:%.*]] = stablehlo.clamp [[LO]], [[A]], [[HI]] : (tensor<f16>, tensor<4x8x2x16xf16>, tensor<f16>) -> tensor<4x8x2x16xf16>
// CHECK-NEXT:    [[A8:%.*]] = stablehlo.convert [[AC]] : (tensor<4x8x2x16xf16>) -> tensor<4x8x2x16xf8E4M3FN>
// CHECK-NEXT:    [[AR:%.*]] = stablehlo.reshape [[A8]] : (tensor<4x8x2x16xf8E4M3FN>) -> tensor<4x16x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[BC:%.*]] = stablehlo.clamp [[LO2]], [[B]], [[HI2]] : (tensor<f16>, tensor<4x16x3xf16>, tensor<f16>) -> tensor<4x16x3xf16>
// CHECK-NEXT:    [[B8:%.*]] = stablehlo.convert [[BC]] : (tensor<4x16x3xf16>) -> tensor<4x16x3xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[AR]], [[B8]], batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x16x16xf8E4M3FN>, tensor<4x16x3xf8E4M3FN>) -> tensor<4x16x3xf32>
// CHECK-NEXT:    [[DR:%.*]] = stablehlo.reshape [[D]] : (tensor<4x16x3xf32>) -> tensor<4x8x2x3xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[DR]] : (tensor<4x8x2x3xf32>) -> tensor<4x8x2x3xf16>
// CHECK-NEXT:    return [[Y]] : tensor<4x8x2x3xf16>
func.func public @main(%a: tensor<4x8x2x16xf16>, %b: tensor<4x16x3xf16>) -> tensor<4x8x2x3xf16> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [3] x [1] : (tensor<4x8x2x16xf16>, tensor<4x16x3xf16>) -> tensor<4x8x2x3xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<4x8x2x3xf16>
}

// -----

// Two leading batch dimensions (attention's batch x heads), single contracting
// and free dimensions: already grouped, no reshape, no transpose.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[Q:%.*]]: tensor<4x2x8x16xf16>, [[K:%.*]]: tensor<4x2x16x8xf16>) -> tensor<4x2x8x8xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[QC:%.*]] = stablehlo.clamp [[LO]], [[Q]], [[HI]] : (tensor<f16>, tensor<4x2x8x16xf16>, tensor<f16>) -> tensor<4x2x8x16xf16>
// CHECK-NEXT:    [[Q8:%.*]] = stablehlo.convert [[QC]] : (tensor<4x2x8x16xf16>) -> tensor<4x2x8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[KC:%.*]] = stablehlo.clamp [[LO2]], [[K]], [[HI2]] : (tensor<f16>, tensor<4x2x16x8xf16>, tensor<f16>) -> tensor<4x2x16x8xf16>
// CHECK-NEXT:    [[K8:%.*]] = stablehlo.convert [[KC]] : (tensor<4x2x16x8xf16>) -> tensor<4x2x16x8xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[Q8]], [[K8]], batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<4x2x8x16xf8E4M3FN>, tensor<4x2x16x8xf8E4M3FN>) -> tensor<4x2x8x8xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<4x2x8x8xf32>) -> tensor<4x2x8x8xf16>
// CHECK-NEXT:    return [[Y]] : tensor<4x2x8x8xf16>
func.func public @main(%q: tensor<4x2x8x16xf16>, %k: tensor<4x2x16x8xf16>) -> tensor<4x2x8x8xf16> {
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<4x2x8x16xf16>, tensor<4x2x16x8xf16>) -> tensor<4x2x8x8xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<4x2x8x8xf16>
}

// -----

// Non-leading batch dimensions: the lhs batch (dim 1) moves first; the rhs
// (contracting, free, batch) becomes (batch, free, contracting), contracting-minor.
// The product is already in the result's order: no reshape back.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<8x4x16xf16>, [[B:%.*]]: tensor<16x3x4xf16>) -> tensor<4x8x3xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[AC:%.*]] = stablehlo.clamp [[LO]], [[A]], [[HI]] : (tensor<f16>, tensor<8x4x16xf16>, tensor<f16>) -> tensor<8x4x16xf16>
// CHECK-NEXT:    [[A8:%.*]] = stablehlo.convert [[AC]] : (tensor<8x4x16xf16>) -> tensor<8x4x16xf8E4M3FN>
// CHECK-NEXT:    [[AT:%.*]] = stablehlo.transpose [[A8]], dims = [1, 0, 2] : (tensor<8x4x16xf8E4M3FN>) -> tensor<4x8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[BC:%.*]] = stablehlo.clamp [[LO2]], [[B]], [[HI2]] : (tensor<f16>, tensor<16x3x4xf16>, tensor<f16>) -> tensor<16x3x4xf16>
// CHECK-NEXT:    [[B8:%.*]] = stablehlo.convert [[BC]] : (tensor<16x3x4xf16>) -> tensor<16x3x4xf8E4M3FN>
// CHECK-NEXT:    [[BT:%.*]] = stablehlo.transpose [[B8]], dims = [2, 1, 0] : (tensor<16x3x4xf8E4M3FN>) -> tensor<4x3x16xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[AT]], [[BT]], batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<4x8x16xf8E4M3FN>, tensor<4x3x16xf8E4M3FN>) -> tensor<4x8x3xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<4x8x3xf32>) -> tensor<4x8x3xf16>
// CHECK-NEXT:    return [[Y]] : tensor<4x8x3xf16>
func.func public @main(%a: tensor<8x4x16xf16>, %b: tensor<16x3x4xf16>) -> tensor<4x8x3xf16> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [1] x [2], contracting_dims = [2] x [0] : (tensor<8x4x16xf16>, tensor<16x3x4xf16>) -> tensor<4x8x3xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<4x8x3xf16>
}

// -----

// Interleaved dimensions: lhs (free 8, contracting 16, batch 4, free 2) is
// transposed to (batch, free, free, contracting) = 4x8x2x16, then reshaped to
// 4x16x16; the product 4x16x3 is reshaped back to 4x8x2x3.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<8x16x4x2xf16>, [[B:%.*]]: tensor<4x16x3xf16>) -> tensor<4x8x2x3xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[AC:%.*]] = stablehlo.clamp [[LO]], [[A]], [[HI]] : (tensor<f16>, tensor<8x16x4x2xf16>, tensor<f16>) -> tensor<8x16x4x2xf16>
// CHECK-NEXT:    [[A8:%.*]] = stablehlo.convert [[AC]] : (tensor<8x16x4x2xf16>) -> tensor<8x16x4x2xf8E4M3FN>
// CHECK-NEXT:    [[AT:%.*]] = stablehlo.transpose [[A8]], dims = [2, 0, 3, 1] : (tensor<8x16x4x2xf8E4M3FN>) -> tensor<4x8x2x16xf8E4M3FN>
// CHECK-NEXT:    [[AR:%.*]] = stablehlo.reshape [[AT]] : (tensor<4x8x2x16xf8E4M3FN>) -> tensor<4x16x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[BC:%.*]] = stablehlo.clamp [[LO2]], [[B]], [[HI2]] : (tensor<f16>, tensor<4x16x3xf16>, tensor<f16>) -> tensor<4x16x3xf16>
// CHECK-NEXT:    [[B8:%.*]] = stablehlo.convert [[BC]] : (tensor<4x16x3xf16>) -> tensor<4x16x3xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[AR]], [[B8]], batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x16x16xf8E4M3FN>, tensor<4x16x3xf8E4M3FN>) -> tensor<4x16x3xf32>
// CHECK-NEXT:    [[DR:%.*]] = stablehlo.reshape [[D]] : (tensor<4x16x3xf32>) -> tensor<4x8x2x3xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[DR]] : (tensor<4x8x2x3xf32>) -> tensor<4x8x2x3xf16>
// CHECK-NEXT:    return [[Y]] : tensor<4x8x2x3xf16>
func.func public @main(%a: tensor<8x16x4x2xf16>, %b: tensor<4x16x3xf16>) -> tensor<4x8x2x3xf16> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [2] x [0], contracting_dims = [1] x [1] : (tensor<8x16x4x2xf16>, tensor<4x16x3xf16>) -> tensor<4x8x2x3xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<4x8x2x3xf16>
}

// -----

// Several non-contracting dimensions on both sides, no batch: 2x3 collapse to 6
// on the lhs, 4x5 to 20 on the rhs (contracting-major, no transpose needed);
// the 6x20 product is reshaped back to 2x3x4x5.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<2x3x16xf16>, [[B:%.*]]: tensor<16x4x5xf16>) -> tensor<2x3x4x5xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[AC:%.*]] = stablehlo.clamp [[LO]], [[A]], [[HI]] : (tensor<f16>, tensor<2x3x16xf16>, tensor<f16>) -> tensor<2x3x16xf16>
// CHECK-NEXT:    [[A8:%.*]] = stablehlo.convert [[AC]] : (tensor<2x3x16xf16>) -> tensor<2x3x16xf8E4M3FN>
// CHECK-NEXT:    [[AR:%.*]] = stablehlo.reshape [[A8]] : (tensor<2x3x16xf8E4M3FN>) -> tensor<6x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[BC:%.*]] = stablehlo.clamp [[LO2]], [[B]], [[HI2]] : (tensor<f16>, tensor<16x4x5xf16>, tensor<f16>) -> tensor<16x4x5xf16>
// CHECK-NEXT:    [[B8:%.*]] = stablehlo.convert [[BC]] : (tensor<16x4x5xf16>) -> tensor<16x4x5xf8E4M3FN>
// CHECK-NEXT:    [[BR:%.*]] = stablehlo.reshape [[B8]] : (tensor<16x4x5xf8E4M3FN>) -> tensor<16x20xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[AR]], [[BR]], contracting_dims = [1] x [0] : (tensor<6x16xf8E4M3FN>, tensor<16x20xf8E4M3FN>) -> tensor<6x20xf32>
// CHECK-NEXT:    [[DR:%.*]] = stablehlo.reshape [[D]] : (tensor<6x20xf32>) -> tensor<2x3x4x5xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[DR]] : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf16>
// CHECK-NEXT:    return [[Y]] : tensor<2x3x4x5xf16>
func.func public @main(%a: tensor<2x3x16xf16>, %b: tensor<16x4x5xf16>) -> tensor<2x3x4x5xf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [2] x [0] : (tensor<2x3x16xf16>, tensor<16x4x5xf16>) -> tensor<2x3x4x5xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<2x3x4x5xf16>
}

// -----

// Several contracting dimensions (a wgrad over batch x sequence): 4x8 collapse
// to 32 on both sides; the 16x3 product needs no reshape back.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<4x8x16xf16>, [[B:%.*]]: tensor<4x8x3xf16>) -> tensor<16x3xf16>
// CHECK:         [[A8:%.*]] = stablehlo.convert {{.*}} : (tensor<4x8x16xf16>) -> tensor<4x8x16xf8E4M3FN>
// CHECK-NEXT:    [[AR:%.*]] = stablehlo.reshape [[A8]] : (tensor<4x8x16xf8E4M3FN>) -> tensor<32x16xf8E4M3FN>
// CHECK:         [[B8:%.*]] = stablehlo.convert {{.*}} : (tensor<4x8x3xf16>) -> tensor<4x8x3xf8E4M3FN>
// CHECK-NEXT:    [[BR:%.*]] = stablehlo.reshape [[B8]] : (tensor<4x8x3xf8E4M3FN>) -> tensor<32x3xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[AR]], [[BR]], contracting_dims = [0] x [0] : (tensor<32x16xf8E4M3FN>, tensor<32x3xf8E4M3FN>) -> tensor<16x3xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<16x3xf32>) -> tensor<16x3xf16>
// CHECK-NEXT:    return [[Y]] : tensor<16x3xf16>
func.func public @main(%a: tensor<4x8x16xf16>, %b: tensor<4x8x3xf16>) -> tensor<16x3xf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [0, 1] x [0, 1] : (tensor<4x8x16xf16>, tensor<4x8x3xf16>) -> tensor<16x3xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<16x3xf16>
}

// -----

// Contracting dimensions paired out of order (lhs 1<->rhs 2, lhs 2<->rhs 0):
// the lhs pair is contiguous and in order, so the lhs is only reshaped (4x2 ->
// 8, dim 1 major); the rhs is transposed to (free, 2, 0) so that its contracting
// run is flattened in the same pairing order (rhs dim 2 major), then reshaped.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<8x4x2xf16>, [[B:%.*]]: tensor<2x3x4xf16>) -> tensor<8x3xf16>
// CHECK:         [[A8:%.*]] = stablehlo.convert {{.*}} : (tensor<8x4x2xf16>) -> tensor<8x4x2xf8E4M3FN>
// CHECK-NEXT:    [[AR:%.*]] = stablehlo.reshape [[A8]] : (tensor<8x4x2xf8E4M3FN>) -> tensor<8x8xf8E4M3FN>
// CHECK:         [[B8:%.*]] = stablehlo.convert {{.*}} : (tensor<2x3x4xf16>) -> tensor<2x3x4xf8E4M3FN>
// CHECK-NEXT:    [[BT:%.*]] = stablehlo.transpose [[B8]], dims = [1, 2, 0] : (tensor<2x3x4xf8E4M3FN>) -> tensor<3x4x2xf8E4M3FN>
// CHECK-NEXT:    [[BR:%.*]] = stablehlo.reshape [[BT]] : (tensor<3x4x2xf8E4M3FN>) -> tensor<3x8xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[AR]], [[BR]], contracting_dims = [1] x [1] : (tensor<8x8xf8E4M3FN>, tensor<3x8xf8E4M3FN>) -> tensor<8x3xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<8x3xf32>) -> tensor<8x3xf16>
// CHECK-NEXT:    return [[Y]] : tensor<8x3xf16>
func.func public @main(%a: tensor<8x4x2xf16>, %b: tensor<2x3x4xf16>) -> tensor<8x3xf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1, 2] x [2, 0] : (tensor<8x4x2xf16>, tensor<2x3x4xf16>) -> tensor<8x3xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<8x3xf16>
}
