// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16

// Convert family. float -> narrower float: the value is rounded exactly as the
// original rounds it (unscale, round trip through the target type, rescale),
// and the scale is kept. float -> int: unscaled first. int -> float: scale 1.
// A convert to the data dtype itself, or a widening, is free. The F16 prefix
// checks only the first two cases.

// f32 -> bf16 with f32 data: x is unscaled by its argument's scale (one multiply by the
// f32 power of two, as it is), rounded through bf16, then multiplied by 2^-e in two
// factors, high = 2^clamp(-e, -126, 127) and low = 2^clamp(-e - clamp(-e, -126, 127),
// -127, 127) (e the i32 exponent of x's scale; exact for |e| <= 252: a bf16 subnormal at
// 2^-130 comes back as data 1); the result keeps x's scale (the argument).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[UB:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT:    [[UW:%.*]] = stablehlo.convert [[UB]] : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT:    stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    stablehlo.shift_right_logical
// CHECK-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[NE:%.*]] = stablehlo.negate [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[KH:%.*]] = stablehlo.clamp [[CM126]], [[NE]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KHB:%.*]] = stablehlo.add [[KH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KHS:%.*]] = stablehlo.shift_left [[KHB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FH:%.*]] = stablehlo.bitcast_convert [[KHS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FHB:%.*]] = stablehlo.broadcast_in_dim [[FH]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[DH1:%.*]] = stablehlo.multiply [[UW]], [[FHB]] : tensor<4xf32>
// CHECK-NEXT:    [[NL:%.*]] = stablehlo.subtract [[NE]], [[KH]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL2:%.*]] = stablehlo.clamp [[CM127]], [[NL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB2:%.*]] = stablehlo.add [[KL2]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS2:%.*]] = stablehlo.shift_left [[KLB2]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL2:%.*]] = stablehlo.bitcast_convert [[KLS2]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FLB2:%.*]] = stablehlo.broadcast_in_dim [[FL2]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.multiply [[DH1]], [[FLB2]] : tensor<4xf32>
// CHECK-NEXT:    return [[D]], [[XS]] : tensor<4xf32>, tensor<f32>

// f16 data: the same, the unscaling done in f32 and the result converted to
// the f16 data dtype.

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>)
// F16-SAME:    -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[W:%.*]] = stablehlo.convert [[X]] : (tensor<4xf16>) -> tensor<4xf32>
// F16-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// F16-NEXT:    [[U:%.*]] = stablehlo.multiply [[W]], [[XSB]] : tensor<4xf32>
// F16-NEXT:    [[UB:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xbf16>
// F16-NEXT:    [[UW:%.*]] = stablehlo.convert [[UB]] : (tensor<4xbf16>) -> tensor<4xf32>
// F16:         [[D1:%.*]] = stablehlo.multiply [[UW]], {{%.*}} : tensor<4xf32>
// F16:         [[D:%.*]] = stablehlo.multiply [[D1]], {{%.*}} : tensor<4xf32>
// F16-NEXT:    [[DH:%.*]] = stablehlo.convert [[D]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    return [[DH]], [[XS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xbf16> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// f32 -> f16: with f32 data, rounded through f16 like bf16 above. With f16
// data the target is the data dtype and the pair passes through untouched: the
// data already has f16 precision, and its scale keeps it clear of the f16
// overflow the unscaled value would hit.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = []
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[UH16:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-NEXT:    [[UW:%.*]] = stablehlo.convert [[UH16]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:         [[DH1:%.*]] = stablehlo.multiply [[UW]], {{%.*}} : tensor<4xf32>
// CHECK:         [[D:%.*]] = stablehlo.multiply [[DH1]], {{%.*}} : tensor<4xf32>
// CHECK-NEXT:    return [[D]], [[XS]] : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    return [[X]], [[XS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf16> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// float -> int: the integer part of the unscaled value (unscaled by the argument's scale,
// as above), as in the original.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> tensor<4xi32>
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = []
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[I:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK-NEXT:    return [[I]] : tensor<4xi32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xi32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// int -> float: data at scale 1. In f16, where the integers can pass the data type's range
// (int32, where the original has f32: an int32 step count is inf in f16 from 65520 on), the
// data takes the smallest power-of-two scale that brings the largest magnitude below 2^15,
// measured at run time: scale 1 while it fits.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[I:%.*]]: tensor<4xi32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[F:%.*]] = stablehlo.convert [[I]] : (tensor<4xi32>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[F]], [[ONE]] : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main(%arg0: tensor<4xi32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[F:%.*]] = stablehlo.convert %arg0 : (tensor<4xi32>) -> tensor<4xf32>
// F16-NEXT:    [[ABS:%.*]] = stablehlo.abs [[F]] : tensor<4xf32>
// F16:         [[AMAX:%.*]] = stablehlo.reduce([[ABS]] init: {{.*}}) applies stablehlo.maximum
// F16-NEXT:    stablehlo.reduce_precision [[AMAX]], format = e8m0
// F16:         [[C14:%.*]] = stablehlo.constant dense<14> : tensor<i32>
// F16-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract {{.*}}, [[C14]] : tensor<i32>
// F16-NEXT:    [[ZERO:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// F16-NEXT:    [[E:%.*]] = stablehlo.maximum [[EXCESS]], [[ZERO]] : tensor<i32>
// F16-NEXT:    stablehlo.negate [[E]] : tensor<i32>
// F16:         [[DATA:%.*]] = stablehlo.multiply [[F]], {{.*}} : tensor<4xf32>
// F16-NEXT:    stablehlo.convert [[DATA]] : (tensor<4xf32>) -> tensor<4xf16>
func.func public @main(%arg0: tensor<4xi32>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// bf16 -> f32 widening is exact: nothing is emitted, the pair passes through.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    return [[X]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xbf16>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}


// -----

// int16 fits f16 (|-32768| <= 65504), and an int32 -> f16 convert overflows in the
// original too: both at scale 1.

// F16-LABEL: func.func public @main(%arg0: tensor<4xi16>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[F:%.*]] = stablehlo.convert %arg0 : (tensor<4xi16>) -> tensor<4xf32>
// F16-NEXT:    [[H:%.*]] = stablehlo.convert [[F]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// F16-NEXT:    return [[H]], [[ONE]]
func.func public @main(%arg0: tensor<4xi16>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xi16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// F16-LABEL: func.func public @main(%arg0: tensor<4xi32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[H:%.*]] = stablehlo.convert %arg0 : (tensor<4xi32>) -> tensor<4xf16>
// F16-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// F16-NEXT:    return [[H]], [[ONE]]
func.func public @main(%arg0: tensor<4xi32>) -> tensor<4xf16> {
  %0 = stablehlo.convert %arg0 : (tensor<4xi32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// f64 -> f32 (jax_enable_x64) can pass f16's range the same way: measured at run time.

// CHECK-LABEL: func.func public @main(%arg0: tensor<4xf64>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[F:%.*]] = stablehlo.convert %arg0 : (tensor<4xf64>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[F]], [[ONE]]

// F16-LABEL: func.func public @main(%arg0: tensor<4xf64>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[F:%.*]] = stablehlo.convert %arg0 : (tensor<4xf64>) -> tensor<4xf32>
// F16-NEXT:    [[ABS:%.*]] = stablehlo.abs [[F]] : tensor<4xf32>
// F16:         stablehlo.reduce([[ABS]] init: {{.*}}) applies stablehlo.maximum
// F16:         [[DATA:%.*]] = stablehlo.multiply [[F]], {{.*}} : tensor<4xf32>
// F16-NEXT:    stablehlo.convert [[DATA]] : (tensor<4xf32>) -> tensor<4xf16>
func.func public @main(%arg0: tensor<4xf64>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
