// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'rescale{at=drifting-outputs},scalify{data-dtype=f16},simplify' | filecheck %s

// drifting-outputs rescales (amax) the results whose scale can move from one call of the
// step to the next when they are fed back as arguments. A moving average's 0.9 * v is at
// half v's scale (0.9 = 1.8 * 2^-1): its sum with a smaller term returns v at half its
// scale, twice its data, on every call. It is rescaled: an amax reduce before the return.
// (A slower one, 0.99 * v, keeps f32 data in 16-bit modes: slow_averages.py.)

// CHECK-LABEL: func.func public @moving_average
// CHECK:         stablehlo.maximum {{.*}} : tensor<i32>
// CHECK:         [[SUM:%.*]] = stablehlo.add {{.*}} : tensor<8xf16>
// CHECK:         [[WIDE:%.*]] = stablehlo.convert [[SUM]] : (tensor<8xf16>) -> tensor<8xf32>
// CHECK:         [[ABS:%.*]] = stablehlo.abs [[WIDE]] : tensor<8xf32>
// CHECK:         stablehlo.reduce([[ABS]] init: {{.*}}) applies stablehlo.maximum
// CHECK:         return
func.func public @moving_average(%v: tensor<8xf32>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %decay = stablehlo.constant dense<0.9> : tensor<8xf32>
  %rate = stablehlo.constant dense<0.1> : tensor<8xf32>
  %0 = stablehlo.multiply %decay, %v : tensor<8xf32>
  %1 = stablehlo.multiply %rate, %x : tensor<8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----

// An update that adds to an argument at its own scale (SGD's w - lr * g) returns the runtime
// max of w's scale and the update's: never below w's, so it cannot drift down, and it is
// not rescaled; nor is an argument handed back as it is.

// CHECK-LABEL: func.func public @sgd_update
// CHECK-NOT:     stablehlo.reduce
// CHECK:         return
func.func public @sgd_update(%w: tensor<8xf32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %lr = stablehlo.constant dense<0.1> : tensor<8xf32>
  %0 = stablehlo.multiply %lr, %g : tensor<8xf32>
  %1 = stablehlo.subtract %w, %0 : tensor<8xf32>
  return %1, %g : tensor<8xf32>, tensor<8xf32>
}
