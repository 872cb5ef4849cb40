package tensor

// LinearBiasInGemm lets the external tests turn the bias gradient in the weight
// gradient's GEMM off (linearBiasInGemm).
var LinearBiasInGemm = &linearBiasInGemm
