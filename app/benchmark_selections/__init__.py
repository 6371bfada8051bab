"""benchmark_selections"""
