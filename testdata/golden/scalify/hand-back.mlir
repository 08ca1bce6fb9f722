// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'rescale{at=drifting-outputs},scalify{data-dtype=f16},simplify' | filecheck %s --check-prefix AMAX

// Without a rescale point (f32 and bf16 data by default), a result whose scale is a static
// power of two away from one argument's is handed back at that argument's scale: its data
// is shifted by the static power (exact), and the argument's scale is returned as it came.
// A moving average's 0.99 * v is at half v's scale (0.99 = 1.98 * 2^-1); returned so, v's
// scale would halve on every call it is fed back, saturate at 2^-126, then overflow.

// CHECK-LABEL: func.func public @moving_average
// CHECK-SAME:    (%[[V:.*]]: tensor<8xf32>, %[[VS:.*]]: tensor<f32>, %{{.*}}: tensor<8xf32>, %{{.*}}: tensor<f32>)
// CHECK-DAG:     %[[HALF:.*]] = stablehlo.constant dense<5.000000e-01> : tensor<8xf32>
// CHECK:         %[[SUM:.*]] = stablehlo.add {{.*}} : tensor<8xf32>
// CHECK:         %[[BACK:.*]] = stablehlo.multiply %[[SUM]], %[[HALF]] : tensor<8xf32>
// CHECK:         return %[[BACK]], %[[VS]] : tensor<8xf32>, tensor<f32>

// With drifting-outputs (the f16 default) the same result takes its scale from its data
// instead (an amax), and nothing is handed back statically.

// AMAX-LABEL: func.func public @moving_average
// AMAX:         stablehlo.reduce({{.*}}) applies stablehlo.maximum
// AMAX-NOT:     dense<5.000000e-01>
// AMAX:         return
func.func public @moving_average(%v: tensor<8xf32>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %decay = stablehlo.constant dense<0.99> : tensor<8xf32>
  %rate = stablehlo.constant dense<0.01> : tensor<8xf32>
  %0 = stablehlo.multiply %decay, %v : tensor<8xf32>
  %1 = stablehlo.multiply %rate, %x : tensor<8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----

// A result whose scale is not one argument's times a static power (here v's scale times
// x's) is returned at its own, computed scale: nothing to hand back to.

// CHECK-LABEL: func.func public @product_of_arguments
// CHECK-NOT:     dense<5.000000e-01>
// CHECK:         return %{{[0-9]+}}, %{{[0-9]+}}, %arg0, %arg1 : tensor<8xf32>, tensor<f32>, tensor<8xf32>, tensor<f32>
func.func public @product_of_arguments(%v: tensor<8xf32>, %x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = stablehlo.multiply %v, %x : tensor<8xf32>
  return %0, %v : tensor<8xf32>, tensor<8xf32>
}
