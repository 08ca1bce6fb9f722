// RUN: scalify-hlo rewrite %s --pipeline 'rescale{at=dot-outputs},scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --pipeline 'rescale{at=dot-outputs method=rms rounding=up},scalify{data-dtype=f32}' | filecheck --check-prefix=RMSUP %s

// A rescaled dot output: amax of the data, rounded to a power of two (1 when zero or
// non-finite), divided out of the data and multiplied into the scale.
// CHECK-LABEL: @main
// CHECK-SAME:    ([[XD:%.*]]: tensor<4x8xf32>, [[XS:%.*]]: tensor<f32>, [[WD:%.*]]: tensor<8x3xf32>, [[WS:%.*]]: tensor<f32>)
// CHECK:         [[DOT:%.*]] = stablehlo.dot_general [[XD]], [[WD]], contracting_dims = [1] x [0] :
// CHECK:         [[DATA:%.*]] = stablehlo.multiply [[DOT]], {{%.*}} : tensor<4x3xf32>
// CHECK:         [[ABS:%.*]] = stablehlo.abs [[DATA]] : tensor<4x3xf32>
// CHECK:         [[AMAX:%.*]] = stablehlo.reduce([[ABS]] init: {{%.*}}) applies stablehlo.maximum across dimensions = [0, 1]
// CHECK:         [[P2:%.*]] = stablehlo.reduce_precision [[AMAX]], format = e8m0 : tensor<f32>
// CHECK:         [[FIN:%.*]] = stablehlo.is_finite [[P2]]
// CHECK:         [[POS:%.*]] = stablehlo.compare GT, [[P2]], {{%.*}}, FLOAT
// CHECK:         [[OK:%.*]] = stablehlo.and [[FIN]], [[POS]]
// CHECK:         [[F:%.*]] = stablehlo.select [[OK]], [[P2]], {{%.*}} : tensor<i1>, tensor<f32>
// CHECK:         [[INV:%.*]] = stablehlo.divide {{%.*}}, [[F]] : tensor<f32>
// CHECK:         [[B:%.*]] = stablehlo.broadcast_in_dim [[INV]], dims = [] : (tensor<f32>) -> tensor<4x3xf32>
// CHECK:         [[NEWDATA:%.*]] = stablehlo.multiply [[DATA]], [[B]] : tensor<4x3xf32>
// CHECK:         [[SS:%.*]] = stablehlo.multiply [[XS]], [[WS]] : tensor<f32>
// CHECK:         [[SF:%.*]] = stablehlo.multiply [[SS]], [[F]] : tensor<f32>
// CHECK:         [[NEWSCALE:%.*]] = stablehlo.multiply [[SF]], {{%.*}} : tensor<f32>
// CHECK:         return [[NEWDATA]], [[NEWSCALE]]
// CHECK-NOT:     scalify.rescale

// RMS statistic, rounded up to the next power of two.
// RMSUP-LABEL: @main
// RMSUP:         [[SQ:%.*]] = stablehlo.multiply [[D:%.*]], [[D]] : tensor<4x3xf32>
// RMSUP:         stablehlo.reduce([[SQ]] init: {{%.*}}) applies stablehlo.add across dimensions = [0, 1]
// RMSUP:         [[RMS:%.*]] = stablehlo.sqrt
// RMSUP:         [[P2:%.*]] = stablehlo.reduce_precision [[RMS]], format = e8m0
// RMSUP:         [[LT:%.*]] = stablehlo.compare LT, [[P2]], [[RMS]], FLOAT
// RMSUP:         [[TWICE:%.*]] = stablehlo.multiply [[P2]], {{%.*}} : tensor<f32>
// RMSUP:         stablehlo.select [[LT]], [[TWICE]], [[P2]]
func.func public @main(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
