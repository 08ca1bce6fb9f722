// RUN: scalify-hlo rewrite %s --pipeline 'rescale{at=dot-outputs},scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --pipeline 'rescale{at=dot-outputs method=rms rounding=up},scalify{data-dtype=f32}' | filecheck --check-prefix=RMSUP %s

// A rescaled dot output: the amax of the data, rounded to a power of two r;
// its i32 exponent F is read from r's bits when 2^-126 <= r <= 2^126, and is 0
// otherwise (zero, subnormal, huge or non-finite). The data is multiplied by
// 2^-F, built from r's bits in one subtract (biased exponents of 2^F and 2^-F add
// up to 254; 1.0's bits otherwise) and F is added to the scale's exponent
// S0 = x_e + w_e + 2 (the product of the input scales, the 2 being the dot's
// unit scaling 2^2 ~ sqrt(K), K = 8: its data was multiplied by 1/4). All-zero
// data (amax 0) instead moves the scale to an all-zero argument's, 1 under
// common-scale=first (f32 data): its exponent gets -S0 added.
// At the return, the f32 scale is 2^clamp(E, -126, 127) and the data takes the
// excess 2^clamp(E - that, -127, 127).
// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[XD:%.*]]: tensor<4x8xf32>, [[XS:%.*]]: tensor<f32>, [[WD:%.*]]: tensor<8x3xf32>, [[WS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4x3xf32>, tensor<f32>)
// CHECK-NEXT:    [[DOT:%.*]] = stablehlo.dot_general [[XD]], [[WD]], contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    [[QUARTER:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<4x3xf32>
// CHECK-NEXT:    [[DATA:%.*]] = stablehlo.multiply [[DOT]], [[QUARTER]] : tensor<4x3xf32>
// CHECK-NEXT:    [[ABS:%.*]] = stablehlo.abs [[DATA]] : tensor<4x3xf32>
// CHECK-NEXT:    [[ZERO:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[AMAX:%.*]] = stablehlo.reduce([[ABS]] init: [[ZERO]]) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    [[P2:%.*]] = stablehlo.reduce_precision [[AMAX]], format = e8m0 : tensor<f32>
// CHECK-NEXT:    [[TINY:%.*]] = stablehlo.constant dense<1.17549435E-38> : tensor<f32>
// CHECK-NEXT:    [[GE:%.*]] = stablehlo.compare GE, [[P2]], [[TINY]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:    [[HUGE:%.*]] = stablehlo.constant dense<8.50705917E+37> : tensor<f32>
// CHECK-NEXT:    [[LE:%.*]] = stablehlo.compare LE, [[P2]], [[HUGE]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:    [[OK:%.*]] = stablehlo.and [[GE]], [[LE]] : tensor<i1>
// CHECK-NEXT:    [[PB:%.*]] = stablehlo.bitcast_convert [[P2]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    [[PSH:%.*]] = stablehlo.shift_right_logical [[PB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:    [[PE:%.*]] = stablehlo.subtract [[PSH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[C254:%.*]] = stablehlo.constant dense<2130706432> : tensor<i32>
// CHECK-NEXT:    [[NFI:%.*]] = stablehlo.subtract [[C254]], [[PB]] : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1065353216> : tensor<i32>
// CHECK-NEXT:    [[NFS:%.*]] = stablehlo.select [[OK]], [[NFI]], [[ONE]] : tensor<i1>, tensor<i32>
// CHECK-NEXT:    [[NFF:%.*]] = stablehlo.bitcast_convert [[NFS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[NFFB:%.*]] = stablehlo.broadcast_in_dim [[NFF]], dims = [] : (tensor<f32>) -> tensor<4x3xf32>
// CHECK-NEXT:    [[NEWDATA:%.*]] = stablehlo.multiply [[DATA]], [[NFFB]] : tensor<4x3xf32>
// CHECK-NEXT:    [[C0:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[WS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[WE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[SE:%.*]] = stablehlo.add [[XE]], [[WE]] : tensor<i32>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[S0:%.*]] = stablehlo.add [[SE]], [[C2]] : tensor<i32>
// CHECK-NEXT:    [[TOONE:%.*]] = stablehlo.subtract [[C0]], [[S0]] : tensor<i32>
// CHECK-NEXT:    [[FZERO:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[ISZERO:%.*]] = stablehlo.compare EQ, [[AMAX]], [[FZERO]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.select [[ISZERO]], [[TOONE]], [[C0]] : tensor<i1>, tensor<i32>
// CHECK-NEXT:    [[MOVED:%.*]] = stablehlo.select [[OK]], [[PE]], [[Z]] : tensor<i1>, tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[S0]], [[MOVED]] : tensor<i32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4x3xf32>
// CHECK-NEXT:    [[OUTDATA:%.*]] = stablehlo.multiply [[NEWDATA]], [[LOFB]] : tensor<4x3xf32>
// CHECK-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[OUTSCALE:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[OUTDATA]], [[OUTSCALE]] : tensor<4x3xf32>, tensor<f32>
// CHECK-NOT:     scalify.rescale

// RMS statistic, rounded up to the next power of two (twice the rounded value
// when rounding went down), then turned into an exponent the same way.
// RMSUP-LABEL: @main
// RMSUP:         [[SQ:%.*]] = stablehlo.multiply [[D:%.*]], [[D]] : tensor<4x3xf32>
// RMSUP-NEXT:    [[ZERO:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// RMSUP-NEXT:    [[SUM:%.*]] = stablehlo.reduce([[SQ]] init: [[ZERO]]) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
// RMSUP-NEXT:    [[N:%.*]] = stablehlo.constant dense<1.200000e+01> : tensor<f32>
// RMSUP-NEXT:    [[MEAN:%.*]] = stablehlo.divide [[SUM]], [[N]] : tensor<f32>
// RMSUP-NEXT:    [[RMS:%.*]] = stablehlo.sqrt [[MEAN]] : tensor<f32>
// RMSUP-NEXT:    [[P2:%.*]] = stablehlo.reduce_precision [[RMS]], format = e8m0 : tensor<f32>
// RMSUP-NEXT:    [[LT:%.*]] = stablehlo.compare LT, [[P2]], [[RMS]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// RMSUP-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// RMSUP-NEXT:    [[TWICE:%.*]] = stablehlo.multiply [[P2]], [[TWO]] : tensor<f32>
// RMSUP-NEXT:    [[R:%.*]] = stablehlo.select [[LT]], [[TWICE]], [[P2]] : tensor<i1>, tensor<f32>
// RMSUP-NEXT:    [[TINY:%.*]] = stablehlo.constant dense<1.17549435E-38> : tensor<f32>
// RMSUP-NEXT:    [[GE:%.*]] = stablehlo.compare GE, [[R]], [[TINY]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// RMSUP-NEXT:    [[HUGE:%.*]] = stablehlo.constant dense<8.50705917E+37> : tensor<f32>
// RMSUP-NEXT:    [[LE:%.*]] = stablehlo.compare LE, [[R]], [[HUGE]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// RMSUP-NEXT:    [[OK:%.*]] = stablehlo.and [[GE]], [[LE]] : tensor<i1>
// RMSUP-NEXT:    [[RB:%.*]] = stablehlo.bitcast_convert [[R]] : (tensor<f32>) -> tensor<i32>
// RMSUP-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// RMSUP-NEXT:    [[RSH:%.*]] = stablehlo.shift_right_logical [[RB]], [[C23]] : tensor<i32>
// RMSUP-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// RMSUP-NEXT:    [[RE:%.*]] = stablehlo.subtract [[RSH]], [[C127]] : tensor<i32>
// RMSUP-NEXT:    [[C254:%.*]] = stablehlo.constant dense<2130706432> : tensor<i32>
// RMSUP-NEXT:    [[NFI:%.*]] = stablehlo.subtract [[C254]], [[RB]] : tensor<i32>
// RMSUP-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1065353216> : tensor<i32>
// RMSUP-NEXT:    [[NFS:%.*]] = stablehlo.select [[OK]], [[NFI]], [[ONE]] : tensor<i1>, tensor<i32>
// RMSUP-NEXT:    [[NFF:%.*]] = stablehlo.bitcast_convert [[NFS]] : (tensor<i32>) -> tensor<f32>
// RMSUP-NEXT:    [[NFFB:%.*]] = stablehlo.broadcast_in_dim [[NFF]], dims = [] : (tensor<f32>) -> tensor<4x3xf32>
// RMSUP-NEXT:    [[NEWDATA:%.*]] = stablehlo.multiply [[D]], [[NFFB]] : tensor<4x3xf32>
// RMSUP:         [[MOVED:%.*]] = stablehlo.select [[OK]], [[RE]], {{%.*}} : tensor<i1>, tensor<i32>
// RMSUP-NEXT:    stablehlo.add {{%.*}}, [[MOVED]] : tensor<i32>
// RMSUP-NOT:     scalify.rescale
func.func public @main(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
