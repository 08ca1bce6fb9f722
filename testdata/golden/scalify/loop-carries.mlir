// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s

// What a while loop carries, with f16 data (common-scale=max). Layers under
// lax.scan are such loops, and the loop-carried form of a value must not lose
// what the rewrite knows about it: a scan over a transformer's blocks had every
// gradient of its weights flushed to 0 or NaN in f16.

// A loop-invariant carry keeps the operand's scale. JAX passes the -1e9 of a
// causal mask into the scan's loop as an operand that the body returns as it
// came. As a constant (static exponent 29) it follows the select's other
// operand down to its runtime scale and saturates to -65504 in f16; carried as a
// runtime exponent it set max(e, 29) as the common scale and flushed the
// logits to 0. Inside the body the constant is rescaled by 2^(29 - e), where e
// goes no lower than -8 (the one maximum: a saturated sentinel stays -256 or
// below, out of a softmax's reach whatever the logits' scale).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>, [[P:%.*]]: tensor<4xi1>)
// CHECK:         [[M:%.*]] = stablehlo.constant dense<-1.862300e+00> : tensor<4xf16>
// CHECK:         [[E:%.*]] = stablehlo.subtract
// CHECK:         [[C29:%.*]] = stablehlo.constant dense<29> : tensor<i32>
// CHECK-NEXT:    stablehlo.while([[D:%.*]] = [[X]], [[DE:%.*]] = [[E]], [[MD:%.*]] = [[M]], {{%.*}} = [[C29]], {{%.*}} = {{%.*}})
// CHECK:         } do {
// CHECK-NEXT:      [[FLOOR:%.*]] = stablehlo.constant dense<-8> : tensor<i32>
// CHECK-NEXT:      [[F:%.*]] = stablehlo.maximum [[DE]], [[FLOOR]] : tensor<i32>
// CHECK-NOT:       stablehlo.maximum
// CHECK:           [[K:%.*]] = stablehlo.subtract [[C29]], [[F]] : tensor<i32>
// CHECK:           [[MW:%.*]] = stablehlo.convert [[MD]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK:           [[MR:%.*]] = stablehlo.convert {{%.*}} : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-NEXT:      [[S:%.*]] = stablehlo.select [[P]], {{%.*}}, [[MR]] : tensor<4xi1>, tensor<4xf16>
// CHECK:           stablehlo.return [[S]], [[F]], [[MD]], [[C29]], {{%.*}}
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi1>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %cst = stablehlo.constant dense<-1.000000e+09> : tensor<4xf32>
  %0:3 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %cst, %iterArg_1 = %c0) : tensor<4xf32>, tensor<4xf32>, tensor<i32>
  cond {
    %1 = stablehlo.compare LT, %iterArg_1, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.select %arg1, %iterArg, %iterArg_0 : tensor<4xi1>, tensor<4xf32>
    %2 = stablehlo.add %iterArg_1, %c1 : tensor<i32>
    stablehlo.return %1, %iterArg_0, %2 : tensor<4xf32>, tensor<4xf32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// A carry that enters as zeros (a scan's accumulated weight gradient, its
// stacked outputs) enters with the unset exponent -2^24: zeros hold at any
// scale, and the maximum with the first value added to it is that value's
// scale. At exponent 0 (scale 1) the maximum kept gradients of 2^-20 at scale
// 1, where their f16 data is 0.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>)
// CHECK:         [[Z:%.*]] = stablehlo.broadcast_in_dim {{%.*}}, dims = [] : (tensor<f16>) -> tensor<4xf16>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.constant dense<-16777216> : tensor<i32>
// CHECK-NEXT:    stablehlo.while([[A:%.*]] = [[Z]], [[AE:%.*]] = [[U]], {{%.*}} = {{%.*}})
// CHECK:         } do {
// CHECK:           [[XE:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<i32>
// CHECK-NEXT:      [[CE:%.*]] = stablehlo.maximum [[AE]], [[XE]] : tensor<i32>
// CHECK:           [[SUM:%.*]] = stablehlo.add {{%.*}}, {{%.*}} : tensor<4xf16>
// CHECK:           stablehlo.return [[SUM]], [[CE]], {{%.*}}
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zeros = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %0:2 = stablehlo.while(%iterArg = %zeros, %iterArg_0 = %c0) : tensor<4xf32>, tensor<i32>
  cond {
    %1 = stablehlo.compare LT, %iterArg_0, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.add %iterArg, %arg0 : tensor<4xf32>
    %2 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %1, %2 : tensor<4xf32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// A loop's result that starts another loop (a scan's final carry handed to the
// next scan: an LSTM encoder's state starting its decoder) enters with its own
// exponent. Its scale may be unset (the first loop's carry entered as zeros),
// so the second loop's maximum still skips an unset one, but at run time it is
// set: the second loop used to enter with the unset exponent -2^24, and the
// decoder read the encoder's state as 0 (seq2seq's encoder gradients were all
// zero in f16, its decoder's 45% off).

// CHECK-LABEL: func.func public @main
// CHECK:         [[U:%.*]] = stablehlo.constant dense<-16777216> : tensor<i32>
// CHECK-NEXT:    [[FIRST:%[0-9]+]]:3 = stablehlo.while({{%.*}} = {{%.*}}, {{%.*}} = [[U]], {{%.*}} = {{%.*}})
// CHECK:         stablehlo.while({{%.*}} = [[FIRST]]#0, {{%.*}} = [[FIRST]]#1, {{%.*}} = {{%.*}})
// CHECK:         } do {
// CHECK:           stablehlo.maximum
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zeros = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %0:2 = stablehlo.while(%iterArg = %zeros, %iterArg_0 = %c0) : tensor<4xf32>, tensor<i32>
  cond {
    %2 = stablehlo.compare LT, %iterArg_0, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %2 = stablehlo.add %iterArg, %arg0 : tensor<4xf32>
    %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %2, %3 : tensor<4xf32>, tensor<i32>
  }
  %1:2 = stablehlo.while(%iterArg = %0#0, %iterArg_0 = %c0) : tensor<4xf32>, tensor<i32>
  cond {
    %2 = stablehlo.compare LT, %iterArg_0, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %2 = stablehlo.add %iterArg, %arg0 : tensor<4xf32>
    %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %2, %3 : tensor<4xf32>, tensor<i32>
  }
  return %1#0 : tensor<4xf32>
}

// -----

// A stack the loop fills one slice per trip (a scan's stacked outputs, the
// residuals its transpose reads back) carries one exponent per slice: the
// slices of a LayerNorm's rsqrt(var)^3 are 2^17 apart between a GPT's first
// and last layer, and at the largest one's scale the others lost their bits in
// f16 (2^40 apart: flushed to 0). A write stores the slice's data as it is and
// its exponent in an i32 vector; a read of one slice gets its exponent back;
// any other use sees the stack at the largest exponent.

// CHECK-LABEL: func.func public @main
// CHECK:         [[Z:%.*]] = stablehlo.broadcast_in_dim {{%.*}}, dims = [] : (tensor<f16>) -> tensor<3x4xf16>
// CHECK:         [[E0:%.*]] = stablehlo.constant dense<0> : tensor<3xi32>
// CHECK-NEXT:    [[W:%.*]]:5 = stablehlo.while({{%.*}} = {{%.*}}, [[XE:%.*]] = {{%.*}}, [[S:%.*]] = [[Z]], [[SE:%.*]] = [[E0]], [[I:%.*]] = {{%.*}})
// CHECK:         } do {
// CHECK:           [[D:%.*]] = stablehlo.dynamic_update_slice [[S]], {{%.*}}, [[I]], {{%.*}} : (tensor<3x4xf16>, tensor<1x4xf16>, tensor<i32>, tensor<i32>) -> tensor<3x4xf16>
// CHECK-NEXT:      [[SLOT:%.*]] = stablehlo.reshape [[XE]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:      [[DE:%.*]] = stablehlo.dynamic_update_slice [[SE]], [[SLOT]], [[I]] : (tensor<3xi32>, tensor<1xi32>, tensor<i32>) -> tensor<3xi32>
// CHECK:           stablehlo.return {{%.*}}, {{%.*}}, [[D]], [[DE]], {{%.*}}
// CHECK:         stablehlo.dynamic_slice [[W]]#2, {{%.*}}, {{%.*}}, sizes = [1, 4]
// CHECK-NEXT:    stablehlo.dynamic_slice [[W]]#3, {{%.*}}, sizes = [1] : (tensor<3xi32>, tensor<i32>) -> tensor<1xi32>
// CHECK:         [[TOP:%.*]] = stablehlo.reduce([[W]]#3 init: {{%.*}}) applies stablehlo.maximum across dimensions = [0]
// CHECK:         stablehlo.subtract [[W]]#3, {{%.*}} : tensor<3xi32>
// CHECK:         stablehlo.broadcast_in_dim {{%.*}}, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zeros = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
  %0:3 = stablehlo.while(%x = %arg0, %stack = %zeros, %i = %c0) : tensor<4xf32>, tensor<3x4xf32>, tensor<i32>
  cond {
    %1 = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.add %x, %x : tensor<4xf32>
    %2 = stablehlo.reshape %1 : (tensor<4xf32>) -> tensor<1x4xf32>
    %3 = stablehlo.dynamic_update_slice %stack, %2, %i, %c0 : (tensor<3x4xf32>, tensor<1x4xf32>, tensor<i32>, tensor<i32>) -> tensor<3x4xf32>
    %4 = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %1, %3, %4 : tensor<4xf32>, tensor<3x4xf32>, tensor<i32>
  }
  %5 = stablehlo.dynamic_slice %0#1, %c1, %c0, sizes = [1, 4] : (tensor<3x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x4xf32>
  %6 = stablehlo.reshape %5 : (tensor<1x4xf32>) -> tensor<4xf32>
  return %6, %0#1 : tensor<4xf32>, tensor<3x4xf32>
}
