// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Multiply family: the op on the data; the result exponent is the sum of the
// operands' i32 exponents (one rank-0 i32 add, no tensor-sized work). At the
// result the exponent e becomes the f32 scale 2^clamp(e, -126, 127), the excess
// multiplied into the data.
//
// This first case also pins the exponent read, here and nowhere else: an f32 scale
// argument s (a power of two) enters the program as its i32 exponent
// e = (bits(s) >> 23) - 127 (shift out the 23 mantissa bits, subtract the bias), read
// where it is first needed; the constants 23 and 127 are made once per function and
// shared by later reads (y_s here). Every other golden matches a read loosely (the
// bitcast of the scale, then the subtract that yields its exponent), so a change to how
// exponents are read fails here, once, and not in every golden that reads a scale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[X]], [[Y]] : tensor<4xf32>
// CHECK-NEXT:    [[XEBITS:%.*]] = stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[XEC23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    [[XESH:%.*]] = stablehlo.shift_right_logical [[XEBITS]], [[XEC23]] : tensor<i32>
// CHECK-NEXT:    [[XEC127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:    [[XE:%.*]] = stablehlo.subtract [[XESH]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[YEBITS:%.*]] = stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[YESH:%.*]] = stablehlo.shift_right_logical [[YEBITS]], [[XEC23]] : tensor<i32>
// CHECK-NEXT:    [[YE:%.*]] = stablehlo.subtract [[YESH]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[XE]], [[YE]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[EH:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EX:%.*]] = stablehlo.subtract [[E]], [[EH]] : tensor<i32>
// CHECK:         [[R1:%.*]] = stablehlo.multiply [[M]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R1]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant 0.1 becomes data 1.6 with the static scale 2^-4: the product is at x's scale
// times 2^-4, a static power, so no exponent arithmetic is emitted. Returned with x's type,
// it is handed back at x's own scale (hand-back.mlir): its data times 2^-4, exact, and x's
// scale returned as it came.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[X]], [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.constant dense<6.250000e-02> : tensor<4xf32>
// CHECK-NEXT:    [[R1:%.*]] = stablehlo.multiply [[M]], [[P]] : tensor<4xf32>
// CHECK-NEXT:    return [[R1]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
  %0 = stablehlo.multiply %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Scales stay symbolic through a chain: x * y * x has exponent 2 * x_e + y_e
// (an i32 multiply by 2 and an add), only materialized at the return.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[M1:%.*]] = stablehlo.multiply [[X]], [[Y]] : tensor<4xf32>
// CHECK-NEXT:    [[M2:%.*]] = stablehlo.multiply [[M1]], [[X]] : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[XE2:%.*]] = stablehlo.multiply [[XE]], [[TWO]] : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[YE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[XE2]], [[YE]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[EH:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EX:%.*]] = stablehlo.subtract [[E]], [[EH]] : tensor<i32>
// CHECK:         [[R1:%.*]] = stablehlo.multiply [[M2]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R1]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg1 : tensor<4xf32>
  %1 = stablehlo.multiply %0, %arg0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
