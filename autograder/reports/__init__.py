"""What a grade is written as."""
