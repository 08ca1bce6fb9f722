// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Dot family (dot_general, convolution), unit scaling: data dot(a_d, b_d) * 2^-k
// and i32 exponent a_e + b_e + k (i32 adds, no f32 multiply of scales), with 2^k
// the power of two nearest sqrt(K) for K contracted elements, so a dot of
// unit-variance data stays near unit variance. At the result the exponent e
// becomes the f32 scale 2^clamp(e, -126, 127), the excess multiplied into the data.

// K = 16: data * 2^-2, exponent a_e + b_e + 2.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<2x16xf32>, [[AS:%.*]]: tensor<f32>, [[B:%.*]]: tensor<16x3xf32>, [[BS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<2x3xf32>, tensor<f32>)
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[A]], [[B]], contracting_dims = [1] x [0] : (tensor<2x16xf32>, tensor<16x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<2x3xf32>
// CHECK-NEXT:    [[D1:%.*]] = stablehlo.multiply [[D]], [[Q]] : tensor<2x3xf32>
// CHECK:         stablehlo.bitcast_convert [[AS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[AE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[BS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[BE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.add [[AE]], [[BE]] : tensor<i32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[P]], [[K]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[E]], [[H]] : tensor<i32>
// CHECK:         [[D2:%.*]] = stablehlo.multiply [[D1]], {{%.*}} : tensor<2x3xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[D2]], [[S]] : tensor<2x3xf32>, tensor<f32>
func.func public @main(%arg0: tensor<2x16xf32>, %arg1: tensor<16x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<2x16xf32>, tensor<16x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Batch dimensions are not contracted: K = 16 again, not 4 * 16.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<4x2x16xf32>, [[AS:%.*]]: tensor<f32>, [[B:%.*]]: tensor<4x16x3xf32>, [[BS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4x2x3xf32>, tensor<f32>)
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[A]], [[B]], batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x2x16xf32>, tensor<4x16x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<4x2x3xf32>
// CHECK-NEXT:    [[D1:%.*]] = stablehlo.multiply [[D]], [[Q]] : tensor<4x2x3xf32>
// CHECK:         stablehlo.bitcast_convert [[AS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[AE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[BS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[BE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.add [[AE]], [[BE]] : tensor<i32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[P]], [[K]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[E]], [[H]] : tensor<i32>
// CHECK:         [[D2:%.*]] = stablehlo.multiply [[D1]], {{%.*}} : tensor<4x2x3xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[D2]], [[S]] : tensor<4x2x3xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4x2x16xf32>, %arg1: tensor<4x16x3xf32>) -> tensor<4x2x3xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x2x16xf32>, tensor<4x16x3xf32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// Convolution: every kernel dimension but the output features is contracted,
// K = 3 * 3 * 4 = 36, sqrt(K) = 6, nearest power of two 2^3: data * 2^-3,
// exponent a_e + b_e + 3.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<1x8x8x4xf32>, [[AS:%.*]]: tensor<f32>, [[B:%.*]]: tensor<3x3x4x2xf32>, [[BS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<1x6x6x2xf32>, tensor<f32>)
// CHECK-NEXT:    [[D:%.*]] = stablehlo.convolution([[A]], [[B]]) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = {{\[\[}}0, 0], [0, 0]], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x4xf32>, tensor<3x3x4x2xf32>) -> tensor<1x6x6x2xf32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.constant dense<1.250000e-01> : tensor<1x6x6x2xf32>
// CHECK-NEXT:    [[D1:%.*]] = stablehlo.multiply [[D]], [[E]] : tensor<1x6x6x2xf32>
// CHECK:         stablehlo.bitcast_convert [[AS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[AE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[BS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[BE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.add [[AE]], [[BE]] : tensor<i32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<3> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[P]], [[K]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[E]], [[H]] : tensor<i32>
// CHECK:         [[D2:%.*]] = stablehlo.multiply [[D1]], {{%.*}} : tensor<1x6x6x2xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[D2]], [[S]] : tensor<1x6x6x2xf32>, tensor<f32>
func.func public @main(%arg0: tensor<1x8x8x4xf32>, %arg1: tensor<3x3x4x2xf32>) -> tensor<1x6x6x2xf32> {
  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x4xf32>, tensor<3x3x4x2xf32>) -> tensor<1x6x6x2xf32>
  return %0 : tensor<1x6x6x2xf32>
}
