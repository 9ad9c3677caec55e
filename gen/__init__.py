"""attenio.gen"""
