// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},simplify{pack-scales=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 square-dtype=f32},simplify{pack-scales=none}' | filecheck %s --check-prefix WIDE
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f32 square-encoding=sqrt},simplify{pack-scales=none}' | filecheck %s --check-prefix F32
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16 square-rounding=stochastic},simplify{pack-scales=none}' | filecheck %s --check-prefix SR

// Adam's second moment crosses the step boundary as its signed square root in f16 (default
// square-encoding=auto with f16 data): the argument's data is marked scalify.encoding = "sqrt"
// and squared in f32 on entry (x * |x|, exact for f16 data; the scale is squared
// symbolically), the update runs in f32, and the result is made even-exponent (an odd
// exponent moves a factor 2 into the data), square-rooted with its sign, rescaled by its amax
// and stored in f16: 16 bits hold squares spanning 48 binades instead of 24.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf16>, %arg1: tensor<f32>, %arg2: tensor<4xf16> {scalify.encoding = "sqrt"}, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf16> {scalify.encoding = "sqrt"}, tensor<f32>)
// CHECK:         [[NU:%.*]] = stablehlo.convert %arg2 : (tensor<4xf16>) -> tensor<4xf32>
// CHECK-NEXT:    [[ABS:%.*]] = stablehlo.abs [[NU]] : tensor<4xf32>
// CHECK-NEXT:    stablehlo.multiply [[NU]], [[ABS]] : tensor<4xf32>
// CHECK:         [[SUM:%.*]] = stablehlo.add {{.*}} : tensor<4xf32>
// CHECK:         [[ODD:%.*]] = stablehlo.and {{.*}} : tensor<i32>
// CHECK:         [[EVEN:%.*]] = stablehlo.multiply [[SUM]], {{.*}} : tensor<4xf32>
// CHECK:         stablehlo.shift_right_arithmetic {{.*}} : tensor<i32>
// CHECK-NEXT:    [[SIGN:%.*]] = stablehlo.sign [[EVEN]] : tensor<4xf32>
// CHECK-NEXT:    [[MAG:%.*]] = stablehlo.abs [[EVEN]] : tensor<4xf32>
// CHECK-NEXT:    [[ROOT:%.*]] = stablehlo.sqrt [[MAG]] : tensor<4xf32>
// CHECK-NEXT:    [[SIGNED:%.*]] = stablehlo.multiply [[SIGN]], [[ROOT]] : tensor<4xf32>
// CHECK:         stablehlo.reduce({{.*}}) applies stablehlo.maximum
// CHECK:         stablehlo.multiply [[SIGNED]], {{.*}} : tensor<4xf32>
// CHECK:         stablehlo.convert {{.*}} : (tensor<4xf32>) -> tensor<4xf16>
// CHECK:         return {{.*}} : tensor<4xf16>, tensor<f32>

// square-rounding=stochastic: the root's f32 bits plus a hash of its bits and index, below
// 2^13 (the bits f16 drops), with those bits cleared: rounds up with probability equal to
// the distance from the value below; outside f16's normal range, nearest (the select).
// SR-LABEL: func.func public @main
// SR:         [[BITS:%.*]] = stablehlo.bitcast_convert [[ROOT:%.*]] : (tensor<4xf32>) -> tensor<4xi32>
// SR-NEXT:    stablehlo.iota dim = 0 : tensor<4xi32>
// SR:         stablehlo.xor
// SR:         [[NOISE:%.*]] = stablehlo.and {{.*}} : tensor<4xi32>
// SR:         [[SUM:%.*]] = stablehlo.add [[BITS]], [[NOISE]] : tensor<4xi32>
// SR-NEXT:    [[CUT:%.*]] = stablehlo.and [[SUM]], {{.*}} : tensor<4xi32>
// SR-NEXT:    [[SR:%.*]] = stablehlo.bitcast_convert [[CUT]] : (tensor<4xi32>) -> tensor<4xf32>
// SR:         [[PICK:%.*]] = stablehlo.select {{.*}}, [[SR]], [[ROOT]] : tensor<4xi1>, tensor<4xf32>
// SR-NEXT:    stablehlo.convert [[PICK]] : (tensor<4xf32>) -> tensor<4xf16>

// An explicit square-dtype keeps squares as they are computed: f32 data across the boundary.
// WIDE-LABEL: func.func public @main
// WIDE-SAME:    (%arg0: tensor<4xf16>, %arg1: tensor<f32>, %arg2: tensor<4xf32>, %arg3: tensor<f32>)
// WIDE-SAME:    -> (tensor<4xf32>, tensor<f32>)
// WIDE-NOT:     scalify.encoding
// WIDE-NOT:     stablehlo.sign

// In f32 data the same encoding is f32 data (exact to f32 rounding: tested numerically).
// F32-LABEL: func.func public @main
// F32-SAME:    %arg2: tensor<4xf32> {scalify.encoding = "sqrt"}
// F32-SAME:    -> (tensor<4xf32> {scalify.encoding = "sqrt"}, tensor<f32>)
// F32:         stablehlo.sign
// F32:         stablehlo.sqrt
func.func public @main(%g: tensor<4xf32>, %nu: tensor<4xf32>) -> tensor<4xf32> {
  %b = stablehlo.constant dense<0.999> : tensor<4xf32>
  %c = stablehlo.constant dense<1.000000e-03> : tensor<4xf32>
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.multiply %c, %0 : tensor<4xf32>
  %2 = stablehlo.multiply %b, %nu : tensor<4xf32>
  %3 = stablehlo.add %2, %1 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// Only squares that cross the boundary are encoded: a square used inside the step (the
// gradient's g * g under sqrt) leaves no mark, and the quotient, not a square, is plain f16.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf16>, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf16>, tensor<f32>)
// CHECK-NOT:     scalify.encoding
// CHECK-NOT:     stablehlo.sign
// CHECK:         return

// F32-LABEL: func.func public @main
// F32-NOT:     scalify.encoding
// F32-NOT:     stablehlo.sign
// F32:         return
func.func public @main(%g: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.sqrt %0 : tensor<4xf32>
  %2 = stablehlo.divide %x, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// A square passed through unchanged (an argument returned as it is) is decoded and encoded
// again: the f16 root squared in f32 is exact, so its square root is the same f16 value.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf16> {scalify.encoding = "sqrt"}, %arg1: tensor<f32>, %arg2: tensor<4xf16>, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf16> {scalify.encoding = "sqrt"}, tensor<f32>, tensor<4xf16>, tensor<f32>)
// CHECK:         stablehlo.sqrt
// CHECK:         return

// F32-LABEL: func.func public @main
// F32-SAME:    -> (tensor<4xf32> {scalify.encoding = "sqrt"}, tensor<f32>, tensor<4xf32>, tensor<f32>)
func.func public @main(%nu: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = stablehlo.multiply %g, %g : tensor<4xf32>
  %1 = stablehlo.add %nu, %0 : tensor<4xf32>
  %2 = stablehlo.sqrt %1 : tensor<4xf32>
  %3 = stablehlo.divide %g, %2 : tensor<4xf32>
  return %nu, %3 : tensor<4xf32>, tensor<4xf32>
}
