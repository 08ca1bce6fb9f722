// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' --stats 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix STATS
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none output-head=fp8}' \
// RUN:   | filecheck %s --check-prefix ALL

// The output head stays in the data dtype (output-head=keep, the default): the
// forward dots whose result reaches a rank-0 float result (the loss) through
// forward ops that are no dot, and the backward dots that take one of their
// operands (through layout ops). A kept dot produces f32, as the FP8 GEMMs do, and
// is converted to the data dtype after it. output-head=fp8 casts them like the others.

// Over the file: 5 dots of 3 heads stay, counted but not warned about (a policy,
// not a shape FP8 cannot take), 8 other dots are cast.
// STATS-NOT:  warning
// STATS:      fp8-dots.dots: 13
// STATS-NEXT: fp8-dots.f8E4M3FNxf8E4M3FN: 6
// STATS-NEXT: fp8-dots.f8E4M3FNxf8E5M2: 2
// STATS-NEXT: fp8-dots.fp8: 8
// STATS-NEXT: fp8-dots.output-head: 5

// A two-layer classifier's step: logits = (x @ w1) @ w2, loss = sum(logits).
// The head is the logits dot, the gradient of w2 (it takes h) and the gradient
// into h (it takes w2, transposed); the hidden dot and w1's gradient are FP8.
// CHECK-LABEL: func.func public @main
// CHECK:         %[[H:.*]] = stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK:         %[[L:.*]] = stablehlo.dot_general %[[HD:.*]], %arg2, contracting_dims = [1] x [0] : (tensor<8x4xf16>, tensor<4x2xf16>) -> tensor<8x2xf32>
// CHECK-NEXT:    stablehlo.convert %[[L]] : (tensor<8x2xf32>) -> tensor<8x2xf16>
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x4xf16>, tensor<8x2xf16>) -> tensor<4x2xf32>
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x2xf16>, tensor<2x4xf16>) -> tensor<8x4xf32>
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8E5M2>) -> tensor<16x4xf32>
// ALL-LABEL:     func.func public @main
// ALL-COUNT-5:   stablehlo.dot_general {{.*}}f8E
// ALL-NOT:       stablehlo.dot_general {{.*}} : (tensor<{{.*}}xf16>
func.func public @main(%x: tensor<8x16xf16>, %w1: tensor<16x4xf16>, %w2: tensor<4x2xf16>) -> (tensor<f16>, tensor<16x4xf16>, tensor<4x2xf16>) {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/hidden/dot_general")
  %logits = stablehlo.dot_general %h, %w2, contracting_dims = [1] x [0] : (tensor<8x4xf16>, tensor<4x2xf16>) -> tensor<8x2xf16> loc("jit(step)/jvp(loss)/head/dot_general")
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f16> loc("jit(step)/jvp(loss)/reduce_sum")
  %loss = stablehlo.reduce(%logits init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x2xf16>, tensor<f16>) -> tensor<f16> loc("jit(step)/jvp(loss)/reduce_sum")
  %one = stablehlo.constant dense<1.000000e+00> : tensor<8x2xf16> loc("jit(step)/transpose(jvp(loss))/broadcast_in_dim")
  %dw2 = stablehlo.dot_general %h, %one, contracting_dims = [0] x [0] : (tensor<8x4xf16>, tensor<8x2xf16>) -> tensor<4x2xf16> loc("jit(step)/transpose(jvp(loss))/head/dot_general")
  %w2t = stablehlo.transpose %w2, dims = [1, 0] : (tensor<4x2xf16>) -> tensor<2x4xf16> loc("jit(step)/transpose(jvp(loss))/head/transpose")
  %dh = stablehlo.dot_general %one, %w2t, contracting_dims = [1] x [0] : (tensor<8x2xf16>, tensor<2x4xf16>) -> tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/head/dot_general")
  %dw1 = stablehlo.dot_general %x, %dh, contracting_dims = [0] x [0] : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16> loc("jit(step)/transpose(jvp(loss))/hidden/dot_general")
  return %loss, %dw1, %dw2 : tensor<f16>, tensor<16x4xf16>, tensor<4x2xf16>
}

// -----

// The loss reached out of a loop: the logits dot in a while body, its result
// carried out and summed after the loop. The hidden dot before the loop reaches
// the loss only through the head, so it is cast.
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.dot_general {{.*}} -> tensor<8x4xf32>
// CHECK:         stablehlo.while
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x4xf16>, tensor<4x4xf16>) -> tensor<8x4xf32>
func.func public @main(%x: tensor<8x16xf16>, %w1: tensor<16x4xf16>, %w2: tensor<4x4xf16>) -> tensor<f16> {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/hidden/dot_general")
  %n = stablehlo.constant dense<0> : tensor<i32> loc("jit(step)/jvp(loss)/while")
  %r:2 = stablehlo.while(%i = %n, %a = %h) : tensor<i32>, tensor<8x4xf16>
   cond {
    %two = stablehlo.constant dense<2> : tensor<i32>
    %c = stablehlo.compare LT, %i, %two : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %y = stablehlo.dot_general %a, %w2, contracting_dims = [1] x [0] : (tensor<8x4xf16>, tensor<4x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/while/body/head/dot_general")
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %y : tensor<i32>, tensor<8x4xf16>
  } loc("jit(step)/jvp(loss)/while")
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f16> loc("jit(step)/jvp(loss)/reduce_sum")
  %loss = stablehlo.reduce(%r#1 init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x4xf16>, tensor<f16>) -> tensor<f16> loc("jit(step)/jvp(loss)/reduce_sum")
  return %loss : tensor<f16>
}

// -----

// Only a rank-0 *float* result is a loss: a dot that reaches the step's results
// through an integer (an argmax's index, a scale exponent) is not a head, nor is
// one whose result is returned as a tensor (an inference step has no head).
// CHECK-LABEL: func.func public @main
// CHECK-COUNT-2: stablehlo.dot_general {{.*}} -> tensor<8x4xf32>
func.func public @main(%x: tensor<8x16xf16>, %w1: tensor<16x4xf16>, %w2: tensor<4x4xf16>) -> (tensor<i32>, tensor<8x4xf16>) {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/hidden/dot_general")
  %y = stablehlo.dot_general %h, %w2, contracting_dims = [1] x [0] : (tensor<8x4xf16>, tensor<4x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/out/dot_general")
  %bits = stablehlo.bitcast_convert %h : (tensor<8x4xf16>) -> tensor<8x4xi16> loc("jit(step)/jvp(loss)/bits")
  %wide = stablehlo.convert %bits : (tensor<8x4xi16>) -> tensor<8x4xi32> loc("jit(step)/jvp(loss)/bits")
  %zero = stablehlo.constant dense<0> : tensor<i32> loc("jit(step)/jvp(loss)/reduce_max")
  %top = stablehlo.reduce(%wide init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<8x4xi32>, tensor<i32>) -> tensor<i32> loc("jit(step)/jvp(loss)/reduce_max")
  return %top, %y : tensor<i32>, tensor<8x4xf16>
}

// -----

// A dot that feeds the loss directly *and* the next layer is a head too (a
// VAE's encoder: its mean enters the KL term of the loss and the decoder).
// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf32>
// CHECK:         stablehlo.dot_general {{.*}} -> tensor<8x4xf32>
func.func public @main(%x: tensor<8x16xf16>, %w1: tensor<16x4xf16>, %w2: tensor<4x4xf16>) -> (tensor<f16>, tensor<8x4xf16>) {
  %mean = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/encoder/dot_general")
  %y = stablehlo.dot_general %mean, %w2, contracting_dims = [1] x [0] : (tensor<8x4xf16>, tensor<4x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/decoder/dot_general")
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f16> loc("jit(step)/jvp(loss)/reduce_sum")
  %kl = stablehlo.reduce(%mean init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x4xf16>, tensor<f16>) -> tensor<f16> loc("jit(step)/jvp(loss)/reduce_sum")
  return %kl, %y : tensor<f16>, tensor<8x4xf16>
}

// -----

// A loss computed in the backward pass's terms is not followed: the walk stops
// at ops under `transpose(...)`, so a forward dot whose result only a gradient
// uses is no head.
// CHECK-LABEL: func.func public @main
// CHECK-COUNT-2: stablehlo.dot_general {{.*}} -> tensor<{{.*}}xf32>
func.func public @main(%x: tensor<8x16xf16>, %w1: tensor<16x4xf16>, %g: tensor<8x4xf16>) -> (tensor<f16>, tensor<16x4xf16>) {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/hidden/dot_general")
  %dh = stablehlo.multiply %h, %g : tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/mul")
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f16> loc("jit(step)/transpose(jvp(loss))/reduce_sum")
  %norm = stablehlo.reduce(%dh init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x4xf16>, tensor<f16>) -> tensor<f16> loc("jit(step)/transpose(jvp(loss))/reduce_sum")
  %dw1 = stablehlo.dot_general %x, %dh, contracting_dims = [0] x [0] : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16> loc("jit(step)/transpose(jvp(loss))/hidden/dot_general")
  return %norm, %dw1 : tensor<f16>, tensor<16x4xf16>
}
