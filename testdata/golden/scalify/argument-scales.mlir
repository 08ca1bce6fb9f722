// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 argument-scales=fold},simplify' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s --check-prefix KEEP
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16 argument-scales=fold},simplify' | filecheck %s --check-prefix BF16
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16 argument-scales=fold},simplify' | filecheck %s --check-prefix F16

// argument-scales=fold: an argument whose data has f32's exponent range enters as data *
// scale, exactly, and the step runs at static scales. Two arguments at different scales
// are added with no exponent read, compared or applied, and the sum returns at scale 1.

// CHECK-LABEL: func.func public @sum_of_arguments
// CHECK-SAME:    (%[[X:.*]]: tensor<8xf32>, %[[XS:.*]]: tensor<f32>, %[[Y:.*]]: tensor<8xf32>, %[[YS:.*]]: tensor<f32>)
// CHECK-DAG:     %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NOT:     bitcast_convert
// CHECK:         %[[XB:.*]] = stablehlo.broadcast_in_dim %[[XS]], dims = []
// CHECK:         %[[XV:.*]] = stablehlo.multiply %[[X]], %[[XB]] : tensor<8xf32>
// CHECK:         %[[YB:.*]] = stablehlo.broadcast_in_dim %[[YS]], dims = []
// CHECK:         %[[YV:.*]] = stablehlo.multiply %[[Y]], %[[YB]] : tensor<8xf32>
// CHECK:         %[[SUM:.*]] = stablehlo.add %[[XV]], %[[YV]] : tensor<8xf32>
// CHECK-NOT:     bitcast_convert
// CHECK:         return %[[SUM]], %[[ONE]] : tensor<8xf32>, tensor<f32>

// keep (the pass's default): the scales are read as exponents at run time and y's data is
// brought to x's scale.

// KEEP-LABEL: func.func public @sum_of_arguments
// KEEP:         stablehlo.bitcast_convert %arg3 : (tensor<f32>) -> tensor<i32>
// KEEP:         stablehlo.bitcast_convert %arg1 : (tensor<f32>) -> tensor<i32>
// KEEP:         return %{{[0-9]+}}, %arg1 : tensor<8xf32>, tensor<f32>

// bf16 data is folded in f32 and rounded once (exact: a power of two times a bf16 value).

// BF16-LABEL: func.func public @sum_of_arguments
// BF16:         %[[W:.*]] = stablehlo.convert %arg0 : (tensor<8xbf16>) -> tensor<8xf32>
// BF16:         %[[P:.*]] = stablehlo.multiply %[[W]], %{{.*}} : tensor<8xf32>
// BF16:         stablehlo.convert %[[P]] : (tensor<8xf32>) -> tensor<8xbf16>
// BF16-NOT:     bitcast_convert
// BF16:         return

// f16 data keeps its scales and its unit scaling: that is where a scale holds range
// (2^-30 times data near 1 is 0 in f16).

// F16-LABEL: func.func public @sum_of_arguments
// F16:         stablehlo.bitcast_convert %arg1 : (tensor<f32>) -> tensor<i32>
// F16:         return
func.func public @sum_of_arguments(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %x, %y : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A moving average folded: with the arguments at their original magnitude and f32's range
// in the data, no static power of two moves into a scale either (unit scaling's shifts of
// constants, dots and sums hold no range here): the step is the original's ops, and the
// result returns at scale 1. Kept, 0.99 * v is at v's scale times 2^-1 (0.99 = 1.98 *
// 2^-1), handed back at v's scale.

// CHECK-LABEL: func.func public @moving_average
// CHECK-DAG:     %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG:     %[[RATE:.*]] = stablehlo.constant dense<0.00999999977> : tensor<8xf32>
// CHECK-DAG:     %[[DECAY:.*]] = stablehlo.constant dense<9.900000e-01> : tensor<8xf32>
// CHECK:         %[[V:.*]] = stablehlo.multiply %arg0, %{{.*}} : tensor<8xf32>
// CHECK:         %[[X:.*]] = stablehlo.multiply %arg2, %{{.*}} : tensor<8xf32>
// CHECK-NEXT:    %[[DV:.*]] = stablehlo.multiply %[[DECAY]], %[[V]] : tensor<8xf32>
// CHECK-NEXT:    %[[RX:.*]] = stablehlo.multiply %[[RATE]], %[[X]] : tensor<8xf32>
// CHECK-NEXT:    %[[SUM:.*]] = stablehlo.add %[[DV]], %[[RX]] : tensor<8xf32>
// CHECK-NEXT:    return %[[SUM]], %[[ONE]] : tensor<8xf32>, tensor<f32>

// KEEP-LABEL: func.func public @moving_average
// KEEP:         return %{{[0-9]+}}, %arg1 : tensor<8xf32>, tensor<f32>

// BF16-LABEL: func.func public @moving_average
// BF16-NOT:     bitcast_convert
// BF16:         return

// F16-LABEL: func.func public @moving_average
// F16:         stablehlo.constant dense<1.980000e+00>
func.func public @moving_average(%v: tensor<8xf32>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %decay = stablehlo.constant dense<0.99> : tensor<8xf32>
  %rate = stablehlo.constant dense<0.01> : tensor<8xf32>
  %0 = stablehlo.multiply %decay, %v : tensor<8xf32>
  %1 = stablehlo.multiply %rate, %x : tensor<8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8xf32>
  return %2 : tensor<8xf32>
}
