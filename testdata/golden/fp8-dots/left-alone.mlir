// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' --stats 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{min-size=513 scaling=none}' \
// RUN:   | filecheck %s --check-prefix MIN
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{min-size=513 scaling=none}' --stats \
// RUN:   2>&1 >/dev/null | filecheck %s --check-prefix MINWARN
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{min-size=512 scaling=none}' --stats \
// RUN:   2>&1 >/dev/null | filecheck %s --check-prefix MIN512
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{exclude=lm_head scaling=none}' \
// RUN:   | filecheck %s --check-prefix EXCL
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{exclude=lm_head scaling=none}' --stats \
// RUN:   2>&1 >/dev/null | filecheck %s --check-prefix EXCLWARN

// Dots that fp8-dots leaves alone, in the data dtype, each reported on stderr
// with its location and the reason: shapes the FP8 GEMM cannot take (a
// matrix-vector product, an outer product), operands that are not f16/bf16/f32
// data (integers, values already in FP8), and, by option, dots with fewer
// multiply-adds than min-size (M*N*K; here 8*4*16 = 512 and 8*32*16 = 4096)
// or whose location matches the exclude regular expression.

// WARN:      warning: jit(step)/jvp(loss)/matvec/dot_general: dot_general stays in f16: an operand has no non-contracting dimension (a matrix-vector product)
// WARN-NEXT: warning: jit(step)/jvp(loss)/outer/dot_general: dot_general stays in f16: no contracting dimension
// WARN-NEXT: warning: jit(step)/jvp(loss)/int/dot_general: dot_general stays in i8: operand element type i8 is not a data dtype
// WARN-NEXT: warning: jit(step)/jvp(loss)/f8/dot_general: dot_general stays in f8E4M3FN: operand element type f8E4M3FN is not a data dtype
// WARN-NOT:  warning
// WARN:      fp8-dots.dots: 6
// WARN-NEXT: fp8-dots.f8E4M3FNxf8E4M3FN: 2
// WARN-NEXT: fp8-dots.fp8: 2
// WARN-NEXT: fp8-dots.left-alone: 4

// min-size=513: the 512-multiply-add dot joins the ones left alone.
// MINWARN:      warning: jit(step)/jvp(loss)/matvec/dot_general: dot_general stays in f16
// MINWARN-NEXT: warning: jit(step)/jvp(loss)/outer/dot_general: dot_general stays in f16
// MINWARN-NEXT: warning: jit(step)/jvp(loss)/int/dot_general: dot_general stays in i8
// MINWARN-NEXT: warning: jit(step)/jvp(loss)/f8/dot_general: dot_general stays in f8E4M3FN
// MINWARN-NEXT: warning: jit(step)/jvp(loss)/lm_head/dot_general: dot_general stays in f16: 512 multiply-adds, below min-size=513
// MINWARN-NOT:  warning
// MINWARN:      fp8-dots.dots: 6
// MINWARN-NEXT: fp8-dots.f8E4M3FNxf8E4M3FN: 1
// MINWARN-NEXT: fp8-dots.fp8: 1
// MINWARN-NEXT: fp8-dots.left-alone: 5

// min-size=512: "fewer than": a dot of exactly min-size multiply-adds is cast.
// MIN512-NOT:  multiply-adds
// MIN512:      fp8-dots.fp8: 2
// MIN512-NEXT: fp8-dots.left-alone: 4

// exclude=lm_head: a regular expression searched in the dot's location.
// EXCLWARN:      warning: jit(step)/jvp(loss)/f8/dot_general: dot_general stays in f8E4M3FN
// EXCLWARN-NEXT: warning: jit(step)/jvp(loss)/lm_head/dot_general: dot_general stays in f16: location matches the exclude pattern
// EXCLWARN-NOT:  warning
// EXCLWARN:      fp8-dots.fp8: 1
// EXCLWARN-NEXT: fp8-dots.left-alone: 5

// A matrix-vector product: no non-contracting dimension on the rhs.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[V:%.*]]: tensor<16xf16>) -> tensor<8xf16>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X]], [[V]], contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16xf16>) -> tensor<8xf16>
// CHECK-NEXT:    return [[D]] : tensor<8xf16>
func.func public @main(%x: tensor<8x16xf16>, %v: tensor<16xf16>) -> tensor<8xf16> {
  %0 = stablehlo.dot_general %x, %v, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16xf16>) -> tensor<8xf16> loc("jit(step)/jvp(loss)/matvec/dot_general")
  return %0 : tensor<8xf16>
}

// -----

// An outer product: nothing contracted.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<8xf16>, [[B:%.*]]: tensor<4xf16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[A]], [[B]], contracting_dims = [] x [] : (tensor<8xf16>, tensor<4xf16>) -> tensor<8x4xf16>
// CHECK-NEXT:    return [[D]] : tensor<8x4xf16>
func.func public @main(%a: tensor<8xf16>, %b: tensor<4xf16>) -> tensor<8x4xf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [] x [] : (tensor<8xf16>, tensor<4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/outer/dot_general")
  return %0 : tensor<8x4xf16>
}

// -----

// Integer operands.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xi8>, [[W:%.*]]: tensor<16x4xi8>) -> tensor<8x4xi32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X]], [[W]], contracting_dims = [1] x [0] : (tensor<8x16xi8>, tensor<16x4xi8>) -> tensor<8x4xi32>
// CHECK-NEXT:    return [[D]] : tensor<8x4xi32>
func.func public @main(%x: tensor<8x16xi8>, %w: tensor<16x4xi8>) -> tensor<8x4xi32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xi8>, tensor<16x4xi8>) -> tensor<8x4xi32> loc("jit(step)/jvp(loss)/int/dot_general")
  return %0 : tensor<8x4xi32>
}

// -----

// Operands already in FP8 (fp8-dots run a second time): not cast again.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf8E4M3FN>, [[W:%.*]]: tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X]], [[W]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    return [[D]] : tensor<8x4xf32>
func.func public @main(%x: tensor<8x16xf8E4M3FN>, %w: tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32> loc("jit(step)/jvp(loss)/f8/dot_general")
  return %0 : tensor<8x4xf32>
}

// -----

// Two eligible dots: lm_head (8*4*16 = 512 multiply-adds) and mlp (4096). Both
// are cast by default; min-size=513 and exclude=lm_head leave lm_head in f16.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    -> (tensor<8x4xf16>, tensor<8x32xf16>)
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>) -> tensor<8x32xf32>

// MIN-LABEL: func.func public @main(%arg0: tensor<8x16xf16>, %arg1: tensor<16x4xf16>, %arg2: tensor<16x32xf16>)
// MIN-NEXT:    [[HEAD:%.*]] = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16>
// MIN-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// MIN-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// MIN-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], %arg0, [[HI]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// MIN-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// MIN-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// MIN-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// MIN-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], %arg2, [[HI2]] : (tensor<f16>, tensor<16x32xf16>, tensor<f16>) -> tensor<16x32xf16>
// MIN-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x32xf16>) -> tensor<16x32xf8E4M3FN>
// MIN-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>) -> tensor<8x32xf32>
// MIN-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<8x32xf32>) -> tensor<8x32xf16>
// MIN-NEXT:    return [[HEAD]], [[Y]] : tensor<8x4xf16>, tensor<8x32xf16>

// EXCL-LABEL: func.func public @main(%arg0: tensor<8x16xf16>, %arg1: tensor<16x4xf16>, %arg2: tensor<16x32xf16>)
// EXCL-NEXT:    [[HEAD:%.*]] = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16>
// EXCL:         [[D:%.*]] = stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>) -> tensor<8x32xf32>
// EXCL-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<8x32xf32>) -> tensor<8x32xf16>
// EXCL-NEXT:    return [[HEAD]], [[Y]] : tensor<8x4xf16>, tensor<8x32xf16>
func.func public @main(%x: tensor<8x16xf16>, %w1: tensor<16x4xf16>, %w2: tensor<16x32xf16>) -> (tensor<8x4xf16>, tensor<8x32xf16>) {
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/lm_head/dot_general")
  %1 = stablehlo.dot_general %x, %w2, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16> loc("jit(step)/jvp(loss)/mlp/dot_general")
  return %0, %1 : tensor<8x4xf16>, tensor<8x32xf16>
}
