"""Lights: switch every lamp on. A complete rubricgym plugin in one small package."""
