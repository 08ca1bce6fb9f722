// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16},simplify' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},simplify' | filecheck %s

// Floats made from integer bits keep f32 data up to the nonlinear op that reads them, in
// bf16 and f16 data alike. jax.random turns 23 random bits into a uniform in [1, 2)
// (bitcast of bits | 0x3f800000), subtracts 1, maps it to (-1, 1) with a product and a sum
// by one-element bounds, and takes erf_inv: rounded to bf16's or f16's significand, the
// largest uniforms become 1 (and -0.99999994 becomes -1), whose erf_inv is +-inf. The class
// joined to the bitcast (subtract, the product with a broadcast one-element bound, add) is
// f32; erf_inv reads it in f32 and its result goes on in the data type.

// CHECK-LABEL: func.func public @uniform_to_erf_inv
// CHECK-SAME:    -> (tensor<8x{{bf|f}}16>, tensor<f32>)
// CHECK:         [[F:%.*]] = stablehlo.bitcast_convert {{.*}} : (tensor<8xui32>) -> tensor<8xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.subtract [[F]], {{.*}} : tensor<8xf32>
// CHECK-NOT:     16>
// CHECK:         [[X:%.*]] = stablehlo.add {{.*}} : tensor<8xf32>
// CHECK-NEXT:    chlo.erf_inv [[X]] : tensor<8xf32> -> tensor<8xf32>
func.func public @uniform_to_erf_inv(%bits: tensor<8xui32>) -> tensor<8xf32> {
  %c9 = stablehlo.constant dense<9> : tensor<8xui32>
  %shifted = stablehlo.shift_right_logical %bits, %c9 : tensor<8xui32>
  %one_bits = stablehlo.constant dense<1065353216> : tensor<8xui32>
  %ored = stablehlo.or %shifted, %one_bits : tensor<8xui32>
  %f = stablehlo.bitcast_convert %ored : (tensor<8xui32>) -> tensor<8xf32>
  %one = stablehlo.constant dense<1.0> : tensor<8xf32>
  %u = stablehlo.subtract %f, %one : tensor<8xf32>
  %lo = stablehlo.constant dense<-0.99999994> : tensor<1xf32>
  %lob = stablehlo.broadcast_in_dim %lo, dims = [0] : (tensor<1xf32>) -> tensor<8xf32>
  %width = stablehlo.constant dense<1.99999994> : tensor<1xf32>
  %widthb = stablehlo.broadcast_in_dim %width, dims = [0] : (tensor<1xf32>) -> tensor<8xf32>
  %scaled = stablehlo.multiply %u, %widthb : tensor<8xf32>
  %shift = stablehlo.add %scaled, %lob : tensor<8xf32>
  %n = chlo.erf_inv %shift : tensor<8xf32> -> tensor<8xf32>
  return %n : tensor<8xf32>
}

// -----

// A float bitcast to integers (an exponent read from an f32's bits) seeds no f32 class: the
// argument stays in the data type, unscaled to f32 for the bitcast only.

// CHECK-LABEL: func.func public @float_to_bits
// CHECK-SAME:    (%arg0: tensor<4x{{bf|f}}16>, %arg1: tensor<f32>)
// CHECK:         stablehlo.bitcast_convert {{.*}} : (tensor<4xf32>) -> tensor<4xi32>
func.func public @float_to_bits(%x: tensor<4xf32>) -> tensor<4xi32> {
  %b = stablehlo.bitcast_convert %x : (tensor<4xf32>) -> tensor<4xi32>
  return %b : tensor<4xi32>
}
