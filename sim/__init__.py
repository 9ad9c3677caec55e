"""attenio.sim"""
