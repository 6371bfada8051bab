"""similarity"""
