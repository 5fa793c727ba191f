#!/bin/sh
echo this script is not executable
