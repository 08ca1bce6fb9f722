// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s

// Compare family: operands brought to a common scale, then compared on the
// data. The i1 result has no scale, so the result is one value, not a pair.
// Runtime scales are i32 exponents, e = (bits(s) >> 23) - 127, and data is
// multiplied by 2^k through a factor built from bits,
// bitcast((clamp(-127, k, 127) + 127) << 23).

// Two runtime scales: a compare does no arithmetic between its operands, so
// with f32-range data the common exponent is the midpoint e = (e_x + e_y) >> 1
// (values 2^200 apart both stay representable), moved up to max(e_x, e_y) - 100
// where the spread is larger (no data moves up by more than 2^100: data far from
// 1 would overflow), and both data are multiplied by 2^(e_x - e) and 2^(e_y - e)
// before the compare.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> tensor<4xi1>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[EY:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[SUM:%.*]] = stablehlo.add [[EX]], [[EY]] : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[MID:%.*]] = stablehlo.shift_right_arithmetic [[SUM]], [[ONE]] : tensor<i32>
// CHECK-NEXT:    [[TOP:%.*]] = stablehlo.maximum [[EX]], [[EY]] : tensor<i32>
// CHECK-NEXT:    [[REACH:%.*]] = stablehlo.constant dense<100> : tensor<i32>
// CHECK-NEXT:    [[LOW:%.*]] = stablehlo.subtract [[TOP]], [[REACH]] : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[MID]], [[LOW]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[EX]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KX:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXB:%.*]] = stablehlo.add [[KX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXS:%.*]] = stablehlo.shift_left [[KXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FX:%.*]] = stablehlo.bitcast_convert [[KXS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FXB:%.*]] = stablehlo.broadcast_in_dim [[FX]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[FXB]] : tensor<4xf32>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.subtract [[EY]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[KY:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KYB:%.*]] = stablehlo.add [[KY]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KYS:%.*]] = stablehlo.shift_left [[KYB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FY:%.*]] = stablehlo.bitcast_convert [[KYS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FYB:%.*]] = stablehlo.broadcast_in_dim [[FY]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[FYB]] : tensor<4xf32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.compare GT, [[X1]], [[Y1]], FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    return [[C]] : tensor<4xi1>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xi1> {
  %0 = stablehlo.compare GT, %arg0, %arg1, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// x > 0: the zero constant needs no rescale, and x's scale is not used at all.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> tensor<4xi1>
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.compare GT, [[X]], [[Z]], FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    return [[C]] : tensor<4xi1>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xi1> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0 = stablehlo.compare GT, %arg0, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// x < 0.5: the constant is data 1.0 at the static exponent -1. The common
// exponent is the midpoint e = (e_x - 1) >> 1; x's data is multiplied by 2^(e_x - e) and the
// constant's by 2^(-1 - e).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> tensor<4xi1>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[EC:%.*]] = stablehlo.constant dense<-1> : tensor<i32>
// CHECK-NEXT:    [[SUM:%.*]] = stablehlo.add [[EX]], [[EC]] : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[MID:%.*]] = stablehlo.shift_right_arithmetic [[SUM]], [[ONE]] : tensor<i32>
// CHECK-NEXT:    [[TOP:%.*]] = stablehlo.maximum [[EX]], [[EC]] : tensor<i32>
// CHECK-NEXT:    [[REACH:%.*]] = stablehlo.constant dense<100> : tensor<i32>
// CHECK-NEXT:    [[LOW:%.*]] = stablehlo.subtract [[TOP]], [[REACH]] : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[MID]], [[LOW]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[EX]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KX:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXB:%.*]] = stablehlo.add [[KX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXS:%.*]] = stablehlo.shift_left [[KXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FX:%.*]] = stablehlo.bitcast_convert [[KXS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FXB:%.*]] = stablehlo.broadcast_in_dim [[FX]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[FXB]] : tensor<4xf32>
// CHECK-NEXT:    [[DC:%.*]] = stablehlo.subtract [[EC]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[KC:%.*]] = stablehlo.clamp [[CM127]], [[DC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KCB:%.*]] = stablehlo.add [[KC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KCS:%.*]] = stablehlo.shift_left [[KCB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FC:%.*]] = stablehlo.bitcast_convert [[KCS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FCB:%.*]] = stablehlo.broadcast_in_dim [[FC]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.multiply [[C]], [[FCB]] : tensor<4xf32>
// CHECK-NEXT:    [[LT:%.*]] = stablehlo.compare LT, [[X1]], [[C1]], FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT:    return [[LT]] : tensor<4xi1>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xi1> {
  %cst = stablehlo.constant dense<0.5> : tensor<4xf32>
  %0 = stablehlo.compare LT, %arg0, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}
