// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16

// Nonlinear family (exp, log, tanh, erf, ...): the operand is unscaled
// (data * 2^e, in f32 at least), the op runs in the original element type,
// and the result is re-encoded as data at scale 1. This is by design and
// reported nowhere. The F16 prefix checks only the first and last cases.
//
// Unscaling by an argument's scale (an f32 power of two, as the entry function
// receives it) is one multiply by it, as it is.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.exponential [[U]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[E]], [[ONE]] : tensor<4xf32>, tensor<f32>

// f16 data: unscaled in f32 (the original type), re-encoded to f16. exp(x) of an x that
// may be positive passes 65504 from x = 11.1 on: its largest magnitude is measured, and
// the result takes the smallest power-of-two scale, 1 or above, that holds it in f16. The
// largest *finite* magnitude: one exp(inf) must not flush every other result.

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[W:%.*]] = stablehlo.convert [[X]] : (tensor<4xf16>) -> tensor<4xf32>
// F16-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// F16-NEXT:    [[U:%.*]] = stablehlo.multiply [[W]], [[XSB]] : tensor<4xf32>
// F16-NEXT:    [[E:%.*]] = stablehlo.exponential [[U]] : tensor<4xf32>
// F16-NEXT:    [[A:%.*]] = stablehlo.abs [[E]] : tensor<4xf32>
// F16-NEXT:    [[FIN:%.*]] = stablehlo.is_finite [[E]] : (tensor<4xf32>) -> tensor<4xi1>
// F16:         [[AF:%.*]] = stablehlo.select [[FIN]], [[A]], {{%.*}} : tensor<4xi1>, tensor<4xf32>
// F16:         stablehlo.reduce([[AF]] {{.*}} applies stablehlo.maximum
// F16:         [[K:%.*]] = stablehlo.maximum {{%.*}}, {{%.*}} : tensor<i32>
// F16:         [[EF:%.*]] = stablehlo.multiply [[E]], {{%.*}} : tensor<4xf32>
// F16-NEXT:    [[EH:%.*]] = stablehlo.convert [[EF]] : (tensor<4xf32>) -> tensor<4xf16>
// F16:         return {{%.*}}, {{%.*}} : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A scale computed in the program (the product x * y has scale s_x * s_y) is an i32
// exponent e, applied in two factors built from bits, high = 2^clamp(e, -126, 127) then
// low = 2^clamp(e - high's exponent, -127, 127), two multiplies: exact where data times
// 2^e is a number even when 2^e alone is not (2^-200 times data 2^100).

// CHECK-LABEL: func.func public @derived
// CHECK:         [[XEC23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[XEC127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.add {{.*}} : tensor<i32>
// CHECK-NEXT:    [[HLO:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HE:%.*]] = stablehlo.clamp [[HLO]], [[XE]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[HB:%.*]] = stablehlo.add [[HE]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[HBITS:%.*]] = stablehlo.shift_left [[HB]], [[XEC23]] : tensor<i32>
// CHECK-NEXT:    [[HF:%.*]] = stablehlo.bitcast_convert [[HBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[HFB:%.*]] = stablehlo.broadcast_in_dim [[HF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[P:%.*]], [[HFB]] : tensor<4xf32>
// CHECK-NEXT:    [[REST:%.*]] = stablehlo.subtract [[XE]], [[HE]] : tensor<i32>
// CHECK-NEXT:    [[LLO:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[LE:%.*]] = stablehlo.clamp [[LLO]], [[REST]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[LB:%.*]] = stablehlo.add [[LE]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[LBITS:%.*]] = stablehlo.shift_left [[LB]], [[XEC23]] : tensor<i32>
// CHECK-NEXT:    [[LF:%.*]] = stablehlo.bitcast_convert [[LBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LFB:%.*]] = stablehlo.broadcast_in_dim [[LF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[U1]], [[LFB]] : tensor<4xf32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.exponential [[U]] : tensor<4xf32>
func.func public @derived(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<4xf32>
  %1 = stablehlo.exponential %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A static scale unscales with a constant factor: 0.1 = 1.6 * 2^-4.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.constant dense<6.250000e-02> : tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[C]], [[F]] : tensor<4xf32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.exponential [[U]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[E]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
  %0 = stablehlo.exponential %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A bf16 op with f32 data: unscaled in f32, rounded to bf16, the op runs in
// bf16 as in the original, and the result is widened back to the data dtype and
// rounded to bf16's significand there: XLA:CPU runs a bf16 tanh in f32 and, allowed
// excess precision, drops the bf16 -> f32 round trip after it.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[UB:%.*]] = stablehlo.convert [[U]] : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT:    [[T:%.*]] = stablehlo.tanh [[UB]] : tensor<4xbf16>
// CHECK-NEXT:    [[TW:%.*]] = stablehlo.convert [[T]] : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT:    [[TR:%.*]] = stablehlo.reduce_precision [[TW]], format = e8m7 : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[TR]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = stablehlo.tanh %arg0 : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// chlo ops are in the family too (erf).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[E:%.*]] = chlo.erf [[U]] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[E]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.erf %arg0 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A softmax's exp(x - max x) is at most 1: stored at scale 1 in f16 with no measurement
// (rewrites/value_signs.py; jnp.max's -inf initial is one more maximum on the way).

// CHECK-LABEL: func.func public @softmax_exp
// F16-LABEL:   func.func public @softmax_exp
// F16:         [[E:%.*]] = stablehlo.exponential {{%.*}} : tensor<2x4xf32>
// F16-NEXT:    [[EH:%.*]] = stablehlo.convert [[E]] : (tensor<2x4xf32>) -> tensor<2x4xf16>
// F16-NOT:     stablehlo.reduce
// F16:         return
func.func public @softmax_exp(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
  %ninf2 = stablehlo.constant dense<0xFF800000> : tensor<2xf32>
  %mi = stablehlo.maximum %ninf2, %m : tensor<2xf32>
  %mb = stablehlo.broadcast_in_dim %mi, dims = [0] : (tensor<2xf32>) -> tensor<2x4xf32>
  %s = stablehlo.subtract %x, %mb : tensor<2x4xf32>
  %e = stablehlo.exponential %s : tensor<2x4xf32>
  return %e : tensor<2x4xf32>
}
