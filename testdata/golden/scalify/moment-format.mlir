// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 moment-format=f8E4M3FN moment-rounding=nearest},simplify' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 moment-format=f8E5M2},simplify' | filecheck %s --check-prefix E5
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 moment-format=f8E4M3FN},simplify' | filecheck %s --check-prefix SR
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f32 moment-format=f8E4M3FN},simplify' | filecheck %s --check-prefix F32
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 square-format=f8E4M3FN},simplify' | filecheck %s --check-prefix ROOT

// Adam's first moment, mu' = 0.1 * g + 0.9 * mu with g from the backward pass (a
// transpose(...) name stack), crosses the step boundary as FP8 data: on entry it is widened
// to f16 (exact) and moved from the top binade to unit scale by 2^-7 (the scale takes 2^7,
// statically); the update computes in f32 (the update tail, scalify{update=f32}); on exit
// the amax of the new moment sets the scale (its data in [128, 256)), finite values are
// clamped to +-448 (a convert to FP8 does not saturate) and converted (here rounded to
// nearest): one rounding from f32.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf8E4M3FN>, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf8E4M3FN>, tensor<f32>)
// CHECK-DAG:     [[LOW:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f32>
// CHECK-DAG:     [[HIGH:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f32>
// CHECK-DAG:     [[DOWN:%.*]] = stablehlo.constant dense<7.812500e-03> : tensor<4xf16>
// CHECK:         [[WIDE:%.*]] = stablehlo.convert %arg0 : (tensor<4xf8E4M3FN>) -> tensor<4xf16>
// CHECK-NEXT:    stablehlo.multiply [[WIDE]], [[DOWN]] : tensor<4xf16>
// CHECK:         [[VALUE:%.*]] = stablehlo.add {{.*}} : tensor<4xf32>
// CHECK-NEXT:    [[ABS:%.*]] = stablehlo.abs [[VALUE]] : tensor<4xf32>
// CHECK-NEXT:    stablehlo.reduce([[ABS]] init: {{.*}}) applies stablehlo.maximum
// CHECK:         [[SHIFTED:%.*]] = stablehlo.multiply [[VALUE]], {{.*}} : tensor<4xf32>
// CHECK-NEXT:    [[CLAMPED:%.*]] = stablehlo.clamp [[LOW]], [[SHIFTED]], [[HIGH]]
// CHECK-NEXT:    [[FINITE:%.*]] = stablehlo.is_finite [[SHIFTED]]
// CHECK-NEXT:    [[KEPT:%.*]] = stablehlo.select [[FINITE]], [[CLAMPED]], [[SHIFTED]]
// CHECK-NEXT:    [[FP8:%.*]] = stablehlo.convert [[KEPT]] : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
// CHECK:         return [[FP8]], {{.*}} : tensor<4xf8E4M3FN>, tensor<f32>

// E5M2: top binade [16384, 32768), clamp at 57344; entry moves only 2^-8, so that E5M2's
// smallest subnormal (2^-16) stays in f16 (2^-24).
// E5-LABEL: func.func public @main
// E5-SAME:    (%arg0: tensor<4xf8E5M2>, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
// E5-DAG:     stablehlo.constant dense<5.734400e+04> : tensor<f32>
// E5-DAG:     stablehlo.constant dense<3.906250e-03> : tensor<4xf16>
// E5:         stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf8E5M2>

// moment-rounding=stochastic (the default): a hash of the f32 bits and index, below 2^20 (the
// bits E4M3FN drops), added and those bits cleared, before the clamp.
// SR-LABEL: func.func public @main
// SR:         [[BITS:%.*]] = stablehlo.bitcast_convert [[X:%.*]] : (tensor<4xf32>) -> tensor<4xi32>
// SR:         [[NOISE:%.*]] = stablehlo.and {{.*}} : tensor<4xi32>
// SR:         stablehlo.add [[BITS]], [[NOISE]] : tensor<4xi32>
// SR:         [[PICK:%.*]] = stablehlo.select {{.*}}, {{.*}}, [[X]] : tensor<4xi1>, tensor<4xf32>
// SR-NEXT:    stablehlo.clamp {{.*}}, [[PICK]], {{.*}}
// SR:         stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf8E4M3FN>

// In f32 data the moment computes in f32 and only the boundary rounds (tested numerically).
// F32-LABEL: func.func public @main
// F32-SAME:    (%arg0: tensor<4xf8E4M3FN>, %arg1: tensor<f32>, %arg2: tensor<4xf32>, %arg3: tensor<f32>)
// F32:         stablehlo.convert %arg0 : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
// F32:         return {{.*}} : tensor<4xf8E4M3FN>, tensor<f32>

// Without moment-format the moment is f16 data (ROOT's first function).
// ROOT:       func.func public @main(%arg0: tensor<4xf16>, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
func.func public @main(%mu: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = stablehlo.negate %x : tensor<4xf32> loc("jit(step)/transpose(jvp(loss))/neg")
  %b = stablehlo.constant dense<0.9> : tensor<4xf32>
  %c = stablehlo.constant dense<0.1> : tensor<4xf32>
  %0 = stablehlo.multiply %c, %g : tensor<4xf32>
  %1 = stablehlo.multiply %b, %mu : tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// SGD momentum (optax.trace): t' = g + 0.9 * t, a decayed state plus a gradient with no
// factor, is a first moment too.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf8E4M3FN>, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf8E4M3FN>, tensor<f32>)
func.func public @main(%trace: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = stablehlo.negate %x : tensor<4xf32> loc("jit(step)/transpose(jvp(loss))/neg")
  %b = stablehlo.constant dense<0.9> : tensor<4xf32>
  %0 = stablehlo.multiply %b, %trace : tensor<4xf32>
  %1 = stablehlo.add %g, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Not moments: a weight update w + (-0.01) * g (no decay factor on w), BatchNorm's running
// mean 0.9 * m + 0.1 * mean(x) (a forward value), an average of the weights
// 0.99 * a + 0.01 * w' (w' is no gradient). None is FP8: w and m stay f16 data, and the
// average of the weights, a slow one, f32 (slow_averages.py).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    %arg4: tensor<4xf32>
// CHECK-NOT:     f8E4M3FN
// CHECK:         return
func.func public @main(%w: tensor<4xf32>, %m: tensor<4xf32>, %a: tensor<4xf32>,
                       %x: tensor<2x4xf32>, %y: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %g = stablehlo.negate %y : tensor<4xf32> loc("jit(step)/transpose(jvp(loss))/neg")
  %lr = stablehlo.constant dense<-0.01> : tensor<4xf32>
  %0 = stablehlo.multiply %lr, %g : tensor<4xf32>
  %w1 = stablehlo.add %w, %0 : tensor<4xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
  %half = stablehlo.constant dense<0.5> : tensor<4xf32>
  %mean = stablehlo.multiply %sum, %half : tensor<4xf32>
  %b = stablehlo.constant dense<0.9> : tensor<4xf32>
  %c = stablehlo.constant dense<0.1> : tensor<4xf32>
  %1 = stablehlo.multiply %b, %m : tensor<4xf32>
  %2 = stablehlo.multiply %c, %mean : tensor<4xf32>
  %m1 = stablehlo.add %1, %2 : tensor<4xf32>
  %d = stablehlo.constant dense<0.99> : tensor<4xf32>
  %e = stablehlo.constant dense<0.01> : tensor<4xf32>
  %3 = stablehlo.multiply %d, %a : tensor<4xf32>
  %4 = stablehlo.multiply %e, %w1 : tensor<4xf32>
  %a1 = stablehlo.add %3, %4 : tensor<4xf32>
  return %w1, %m1, %a1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Adam's second moment is a square, stored by its signed square root (square-encoding=auto),
// never as a first moment; square-format=f8E4M3FN stores that root in FP8 (amax scale, clamp),
// and entry squares the FP8 data in f32 (x * |x|, the scale multiplied in between).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf16> {scalify.encoding = "sqrt"}, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)

// ROOT:        func.func public @main(%arg0: tensor<4xf8E4M3FN> {scalify.encoding = "sqrt"}, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
// ROOT-SAME:    -> (tensor<4xf8E4M3FN> {scalify.encoding = "sqrt"}, tensor<f32>)
// ROOT:         [[NU:%.*]] = stablehlo.convert %arg0 : (tensor<4xf8E4M3FN>) -> tensor<4xf32>
// ROOT-NEXT:    [[ABS:%.*]] = stablehlo.abs [[NU]] : tensor<4xf32>
// ROOT:         stablehlo.multiply [[ABS]], {{.*}} : tensor<4xf32>
// ROOT:         stablehlo.multiply [[NU]], {{.*}} : tensor<4xf32>
// ROOT:         stablehlo.sqrt
// ROOT:         stablehlo.reduce({{.*}}) applies stablehlo.maximum
// ROOT:         stablehlo.clamp
// ROOT:         stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
func.func public @main(%nu: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = stablehlo.negate %x : tensor<4xf32> loc("jit(step)/transpose(jvp(loss))/neg")
  %b = stablehlo.constant dense<0.999> : tensor<4xf32>
  %c = stablehlo.constant dense<1.000000e-03> : tensor<4xf32>
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.multiply %c, %0 : tensor<4xf32>
  %2 = stablehlo.multiply %b, %nu : tensor<4xf32>
  %3 = stablehlo.add %2, %1 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
