// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s

// Scale-invariant family (sign, atan2): f(c*x) = f(x) for a positive c, so the
// op runs on the data (its operands at a common scale) and the result has
// scale 1.

// sign: the one operand is already at its own scale; nothing is rescaled, and
// its scale is not even converted to an exponent.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[S:%.*]] = stablehlo.sign [[X]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[S]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sign %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// atan2(y, x): both data are brought to the common scale, the maximum of the
// two i32 exponents E (common-scale=max), each multiplied by 2^(e - E) <= 1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[YE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[YE]], [[XE]] : tensor<i32>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.subtract [[YE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DYB:%.*]] = stablehlo.add [[DYC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DYI:%.*]] = stablehlo.shift_left [[DYB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DYF:%.*]] = stablehlo.bitcast_convert [[DYI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DYFB:%.*]] = stablehlo.broadcast_in_dim [[DYF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[DYFB]] : tensor<4xf32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[DXFB]] : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.atan2 [[Y1]], [[X1]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[A]], [[ONE]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.atan2 %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
