// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none batched=keep}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none batched=keep}' \
// RUN:   --stats 2>&1 >/dev/null | filecheck %s --check-prefix STATS
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' \
// RUN:   | filecheck %s --check-prefix FP8
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{batched=no}' 2>&1 \
// RUN:   | filecheck %s --check-prefix BAD

// batched=keep: a dot with batch dimensions (attention's scores, q . k^T per example and
// head) stays in the data dtype, without a warning (a policy, as the output head is),
// while a dot without them (a projection) is cast. tpu7x's policy: there attention's FP8
// dots cost more than they gain once their operands' casts are counted.

// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.dot_general {{%.*}}, {{%.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x8x4xf16>, tensor<2x8x4xf16>) -> tensor<2x8x8xf16>
// CHECK:         stablehlo.convert {{%.*}} : (tensor<2x8x16xf16>) -> tensor<2x8x16xf8E4M3FN>
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<16x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<16x4xf32>

// STATS-NOT:   warning
// STATS:       fp8-dots.batched: 1
// STATS-NEXT:  fp8-dots.dots: 2
// STATS-NEXT:  fp8-dots.f8E4M3FNxf8E4M3FN: 1
// STATS-NEXT:  fp8-dots.fp8: 1
// STATS-NEXT:  fp8-dots.output-head: 0

// The default (batched=fp8): both are cast.
// FP8-LABEL: func.func public @main
// FP8:         stablehlo.dot_general {{%.*}}, {{%.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x8x4xf8E4M3FN>, tensor<2x8x4xf8E4M3FN>) -> tensor<2x8x8xf32>
// FP8:         stablehlo.dot_general {{.*}} : (tensor<16x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<16x4xf32>

// BAD: error: invalid value 'no' for option 'batched' of pass 'fp8-dots': expected one of fp8, keep
func.func public @main(%q: tensor<2x8x4xf16>, %k: tensor<2x8x4xf16>, %x: tensor<2x8x16xf16>, %w: tensor<16x4xf16>) -> (tensor<2x8x8xf16>, tensor<2x8x4xf16>) {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x8x4xf16>, tensor<2x8x4xf16>) -> tensor<2x8x8xf16> loc("jit(step)/jvp(loss)/attention/dot_general")
  %y = stablehlo.dot_general %x, %w, contracting_dims = [2] x [0] : (tensor<2x8x16xf16>, tensor<16x4xf16>) -> tensor<2x8x4xf16> loc("jit(step)/jvp(loss)/proj/dot_general")
  return %s, %y : tensor<2x8x8xf16>, tensor<2x8x4xf16>
}
