// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 update=scaled}' \
// RUN:   | filecheck %s --check-prefix SCALED
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 delayed-statistics=use}' | filecheck %s --check-prefix F16USE
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16}' \
// RUN:   | filecheck %s --check-prefix BF16
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=bf16 update-rounding=nearest}' \
// RUN:   | filecheck %s --check-prefix BF16N

// The update tail: in a step with a backward pass (ops under JAX's transpose(jvp(...))),
// the elementwise ops that lead only to the results (an optimizer's update) run as in the
// original program, on unscaled values: each value entering the tail is unscaled once (an
// argument's data times its f32 scale, as it is: no exponent read), and each result leaves
// with one scale: 1 for f32 data, unit RMS for f16 data. update=scaled propagates scales
// through them as through the rest of the step.

// SGD: w - lr * g, with g from the backward pass. The constant, the multiply and the
// subtract are the tail: lr stays 0.01 in f32 (not 16-bit data); g's scale is a product of
// runtime factors (the dot's operands'), applied as two factors; w's is its argument's f32
// scale, multiplied as it is. The result is in w's original type at scale 1.

// CHECK-LABEL: func.func public @sgd
// CHECK:         stablehlo.dot_general
// CHECK:         [[LR:%.*]] = stablehlo.constant dense<0.00999999977> : tensor<4x4xf32>
// CHECK:         [[LRG:%.*]] = stablehlo.multiply [[LR]], {{%.*}} : tensor<4x4xf32>
// CHECK-NEXT:    [[WB:%.*]] = stablehlo.broadcast_in_dim %arg1, dims = []
// CHECK-NEXT:    [[W:%.*]] = stablehlo.multiply %arg0, [[WB]]
// CHECK-NEXT:    [[NEW:%.*]] = stablehlo.subtract [[W]], [[LRG]]
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[NEW]], [[ONE]]

// bf16 data: the result is rounded to bf16 stochastically (update-rounding=auto): a hash
// of its f32 bits and indices, below 2^16, added to the bits and the 16 bits that bf16
// drops cleared; a non-finite value is left to the convert. Each index is mixed into the
// hash (xor, then multiply), never multiplied on its own (XLA:TPU computes a product that
// reads no data in a kernel of its own). bf16's 8 significand bits would round a weight's
// update below 2^-9 of it back to the weight.
// BF16-LABEL: func.func public @sgd
// BF16:         [[NEW:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<4x4xf32>
// BF16:         [[BITS:%.*]] = stablehlo.bitcast_convert [[NEW]] : (tensor<4x4xf32>) -> tensor<4x4xi32>
// BF16-NEXT:    [[ROW:%.*]] = stablehlo.iota dim = 0 : tensor<4x4xi32>
// BF16-NEXT:    [[MIXED:%.*]] = stablehlo.xor [[BITS]], [[ROW]] : tensor<4x4xi32>
// BF16:         [[H:%.*]] = stablehlo.multiply [[MIXED]], {{%.*}} : tensor<4x4xi32>
// BF16:         [[COLUMN:%.*]] = stablehlo.iota dim = 1 : tensor<4x4xi32>
// BF16-NEXT:    stablehlo.xor [[H]], [[COLUMN]] : tensor<4x4xi32>
// BF16:         stablehlo.constant dense<65535> : tensor<i32>
// BF16:         [[NOISE:%.*]] = stablehlo.and
// BF16:         stablehlo.constant dense<-65536> : tensor<i32>
// BF16:         [[SUM:%.*]] = stablehlo.add [[BITS]], [[NOISE]] : tensor<4x4xi32>
// BF16:         [[CLEARED:%.*]] = stablehlo.and [[SUM]], {{%.*}} : tensor<4x4xi32>
// BF16:         [[ROUNDED:%.*]] = stablehlo.bitcast_convert [[CLEARED]] : (tensor<4x4xi32>) -> tensor<4x4xf32>
// BF16-NEXT:    [[FINITE:%.*]] = stablehlo.is_finite [[NEW]] : (tensor<4x4xf32>) -> tensor<4x4xi1>
// BF16-NEXT:    [[PICKED:%.*]] = stablehlo.select [[FINITE]], [[ROUNDED]], [[NEW]]
// BF16:         [[DATA:%.*]] = stablehlo.convert [[PICKED]] : (tensor<4x4xf32>) -> tensor<4x4xbf16>
// BF16:         return [[DATA]], {{%.*}} : tensor<4x4xbf16>, tensor<f32>

// BF16N-LABEL: func.func public @sgd
// BF16N:         [[NEW:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<4x4xf32>
// BF16N-NEXT:    [[DATA:%.*]] = stablehlo.convert [[NEW]] : (tensor<4x4xf32>) -> tensor<4x4xbf16>
// BF16N:         return [[DATA]], {{%.*}} : tensor<4x4xbf16>, tensor<f32>

// F16-LABEL: func.func public @sgd
// F16:         [[NEW:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<4x4xf32>
// F16-DAG:     stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [0, 1]
// F16-DAG:     stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [0, 1]
// F16:         stablehlo.sqrt
// F16:         [[DATA:%.*]] = stablehlo.convert {{%.*}} : (tensor<4x4xf32>) -> tensor<4x4xf16>
// F16:         return [[DATA]], {{%.*}} : tensor<4x4xf16>, tensor<f32>

// With delayed statistics (use) the f16 result is stored at the exponent the previous call
// measured for it (the given one, saturating: no wait for its own statistics), and the
// exponent it measures is handed on, held (the given one while the data is at most 8
// binades below it; DelayedExponents.held). For
// all-zero data it hands on the given one (a first call, 0), not the smallest exponent such
// data takes, which would push the next call's nonzero values to f16's largest. The amax
// floor keeps two binades free (12, not 14: room for the largest entry to grow until the
// next call).
// F16USE-LABEL: func.func public @sgd
// F16USE-SAME:    tensor<1xi32> {jax.arg_info = "delayed_exponents"}
// F16USE:         [[GIVEN:%.*]] = stablehlo.reshape {{%.*}} : (tensor<1xi32>) -> tensor<i32>
// F16USE:         [[NEW:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<4x4xf32>
// F16USE:         stablehlo.constant dense<12> : tensor<i32>
// F16USE:         [[USABLE:%.*]] = stablehlo.and
// F16USE:         [[MEASURED:%.*]] = stablehlo.clamp
// F16USE:         [[HANDED:%.*]] = stablehlo.select [[USABLE]], [[MEASURED]], [[GIVEN]] : tensor<i1>, tensor<i32>
// F16USE:         stablehlo.clamp {{%.*}}, [[GIVEN]], {{%.*}} : tensor<i32>
// F16USE:         [[SHIFTED:%.*]] = stablehlo.multiply [[NEW]], {{%.*}} : tensor<4x4xf32>
// F16USE:         stablehlo.clamp {{%.*}}, [[SHIFTED]], {{%.*}} : (tensor<f32>, tensor<4x4xf32>, tensor<f32>)
// F16USE:         [[DATA:%.*]] = stablehlo.convert {{%.*}} : (tensor<4x4xf32>) -> tensor<4x4xf16>
// F16USE:         stablehlo.add [[GIVEN]]
// F16USE:         [[V:%.*]] = stablehlo.reshape [[HANDED]] : (tensor<i32>) -> tensor<1xi32>
// F16USE:         [[KEPT:%.*]] = stablehlo.minimum {{%.*}}, {{%.*}} : tensor<1xi32>
// F16USE:         [[HELD:%.*]] = stablehlo.maximum [[V]], [[KEPT]] : tensor<1xi32>
// F16USE:         return [[DATA]], {{%.*}}, [[HELD]] : tensor<4x4xf16>, tensor<f32>, tensor<1xi32>

// SCALED-LABEL: func.func public @sgd
// SCALED-NOT:     stablehlo.constant dense<1.000000e+00> : tensor<f32>
// SCALED:         return
func.func public @sgd(%w: tensor<4x4xf32>, %x: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %g = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("jit(step)/transpose(jvp())/dot_general")
  %lr = stablehlo.constant dense<1.000000e-02> : tensor<4x4xf32>
  %lrg = stablehlo.multiply %lr, %g : tensor<4x4xf32> loc("jit(step)/mul")
  %new = stablehlo.subtract %w, %lrg : tensor<4x4xf32> loc("jit(step)/sub")
  return %new : tensor<4x4xf32>
}

// -----

// Without a backward pass there is no tail: a forward function's last add keeps its scale
// rule (here the common scale of two arguments), and the result its propagated scale.

// CHECK-LABEL: func.func public @forward
// CHECK-NOT:     stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         return
func.func public @forward(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %s = stablehlo.add %a, %b : tensor<4xf32> loc("jit(f)/add")
  return %s : tensor<4xf32>
}

// -----

// An op with another user than the tail or the return (the loss, a reduction) is not
// tail: only the elementwise suffix is.

// CHECK-LABEL: func.func public @suffix
// CHECK:         stablehlo.reduce
// CHECK:         [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         return {{%.*}}, [[ONE]], {{%.*}}, {{%.*}} : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
func.func public @suffix(%w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %neg = stablehlo.negate %g : tensor<4xf32> loc("jit(step)/transpose(jvp())/neg")
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %sum = stablehlo.reduce(%neg init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32> loc("jit(step)/reduce_sum")
  %new = stablehlo.add %w, %neg : tensor<4xf32> loc("jit(step)/add")
  return %new, %sum : tensor<4xf32>, tensor<f32>
}

// -----

// SGD with momentum 0.9 under bf16 data: the new trace (0.9 * t + g, a first moment) rounds
// to nearest, where the new weight is dithered. A moment moves by a tenth of the way to the
// gradient each step, so nearest rounding drops a change only while the gradient is within
// 2^-8 / 0.1 of it, and then it lags by that much at most (moment_values.fast_moments); its hash
// would be one of three per weight in an Adam step. A decay above 15/16 (momentum 0.99) could
// lag by 39% and keeps the dither.

// BF16-LABEL: func.func public @momentum
// BF16:         [[TRACE:%.*]] = stablehlo.add {{%.*}}, {{%.*}} : tensor<4x4xf32>
// BF16:         [[NEW:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<4x4xf32>
// BF16:         stablehlo.bitcast_convert [[NEW]] : (tensor<4x4xf32>) -> tensor<4x4xi32>
// BF16-NOT:     stablehlo.bitcast_convert [[TRACE]]
// BF16:         stablehlo.convert [[TRACE]] : (tensor<4x4xf32>) -> tensor<4x4xbf16>
// BF16:         return

func.func public @momentum(%w: tensor<4x4xf32>, %t: tensor<4x4xf32>, %x: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %g = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("jit(step)/transpose(jvp())/dot_general")
  %decay = stablehlo.constant dense<9.000000e-01> : tensor<4x4xf32>
  %decayed = stablehlo.multiply %decay, %t : tensor<4x4xf32> loc("jit(step)/mul")
  %trace = stablehlo.add %g, %decayed : tensor<4x4xf32> loc("jit(step)/add")
  %lr = stablehlo.constant dense<1.000000e-02> : tensor<4x4xf32>
  %step = stablehlo.multiply %lr, %trace : tensor<4x4xf32> loc("jit(step)/mul")
  %new = stablehlo.subtract %w, %step : tensor<4x4xf32> loc("jit(step)/sub")
  return %new, %trace : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// BF16-LABEL: func.func public @slow_momentum
// BF16:         [[TRACE:%.*]] = stablehlo.add {{%.*}}, {{%.*}} : tensor<4x4xf32>
// BF16:         stablehlo.bitcast_convert [[TRACE]] : (tensor<4x4xf32>) -> tensor<4x4xi32>
// BF16:         return
func.func public @slow_momentum(%w: tensor<4x4xf32>, %t: tensor<4x4xf32>, %x: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %g = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("jit(step)/transpose(jvp())/dot_general")
  %decay = stablehlo.constant dense<9.900000e-01> : tensor<4x4xf32>
  %decayed = stablehlo.multiply %decay, %t : tensor<4x4xf32> loc("jit(step)/mul")
  %trace = stablehlo.add %g, %decayed : tensor<4x4xf32> loc("jit(step)/add")
  %lr = stablehlo.constant dense<1.000000e-02> : tensor<4x4xf32>
  %step = stablehlo.multiply %lr, %trace : tensor<4x4xf32> loc("jit(step)/mul")
  %new = stablehlo.subtract %w, %step : tensor<4x4xf32> loc("jit(step)/sub")
  return %new, %trace : tensor<4x4xf32>, tensor<4x4xf32>
}
